"""Finding and sharing the local model file, without running it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cantata.core import ConfigurationError
from cantata.models import _llama_model
from cantata.models._llama_model import default_model_path


def test_default_model_is_the_packaged_smollm2_gguf() -> None:
    path = Path(default_model_path())
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_file() and path.read_bytes()[:4] == b"GGUF"


def test_missing_model_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_llama_model, "DEFAULT_MODEL_PACKAGE", "cantata_no_such_model_pkg")
    with pytest.raises(ConfigurationError, match=r"pip install cantata\[local\]"):
        default_model_path()


@pytest.mark.local_model
def test_the_model_is_loaded_once_and_shared() -> None:
    key = _llama_model.ModelKey(default_model_path(), 512, None, 0, None)
    first = _llama_model.shared_model(key, verbose=False)
    assert _llama_model.shared_model(key, verbose=False) is first
    grammar = first.grammar('{"type": "object", "properties": {"a": {"type": "integer"}}}')
    assert first.grammar('{"type": "object", "properties": {"a": {"type": "integer"}}}') is grammar
