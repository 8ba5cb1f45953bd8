# Two commands on a fresh clone: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Portable CPU build of llama.cpp; pip caches the wheel, so it compiles once per machine.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: setup demo demo-notice test lint typecheck unit bench docs clean

setup: $(VENV)/.installed

# pip is quiet, except under `make demo`, whose first run is the long one a newcomer watches.
PIP_QUIET ?= -q

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_QUIET) --upgrade pip
	$(PY) -m pip install $(PIP_QUIET) -e ".[all,dev,compat]"
	touch $@

demo: PIP_QUIET :=
demo: demo-notice setup
	$(PY) examples/demo.py

demo-notice:
	@test -f $(VENV)/.installed || echo "make demo: installing cantata into $(VENV) first. \
	llama.cpp is built from source once per machine (pip caches the wheel): \
	this takes a few minutes; pip's progress follows."

lint: setup
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m ruff format --check src tests benchmarks examples

typecheck: setup
	$(PY) -m mypy

# Two pytest-xdist workers: many tests wait on servers, subprocesses and clusters, so two
# keep both cores busy (a third only adds contention on two cores). The Ray tests share
# one cluster, so they stay on one worker (tests/conftest.py; --dist loadgroup).
unit: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=25 -rs

# The type check runs beside the tests (it is one process on one core),
# each target's output printed whole when it ends.
test: lint
	$(MAKE) -j2 --output-sync=target typecheck unit

bench: setup
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/run.py

# The documentation site, offline, into site/ (warnings are errors: mkdocs.yml sets strict).
# The test suite builds it too (tests/test_docs_site.py), so `make test` checks it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache
