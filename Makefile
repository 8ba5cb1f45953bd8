# Two commands on a fresh clone: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Portable CPU build of llama.cpp; pip caches the wheel, so it compiles once per machine.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: setup demo test lint typecheck unit bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[all,dev]"
	touch $@

demo: setup
	$(PY) examples/demo.py

lint: setup
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m ruff format --check src tests benchmarks examples

typecheck: setup
	$(PY) -m mypy

unit: setup
	$(PY) -m pytest -q -p no:cacheprovider

test: lint typecheck unit

bench: setup
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
