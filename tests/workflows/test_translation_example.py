"""examples/translation_chain.py: with a scripted model (each translator gets the previous
reply only, tokens are streamed in order) and on the embedded model."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from types import ModuleType

import pytest

from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "translation_chain.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("translation_chain_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _translate(messages: list[Message], options: ChatOptions) -> str:
    """Plays the four agents: the writer writes, translators tag what they were given."""
    system, rest = messages[0].text, [m for m in messages if m.role != "system"]
    assert len(rest) == 1, f"each agent sees one message, got {rest}"
    if "write two short" in system:
        return f"story about {rest[0].text}"
    language = system.split("into ")[1].split(".")[0]
    return f"{language}({rest[0].text})"


async def test_chain_streams_every_agent_in_order() -> None:
    example = _load()
    out = io.StringIO()
    client = ScriptedChatClient(_translate, chunk_size=5)
    final = await example.translate("cats", client, out=out)
    assert final == "English(Spanish(French(story about cats)))"
    printed = out.getvalue()
    lines = [line for line in printed.splitlines() if line]
    assert lines == [
        "[writer] story about cats",
        "[french] French(story about cats)",
        "[spanish] Spanish(French(story about cats))",
        "[english] English(Spanish(French(story about cats)))",
    ]


@pytest.mark.local_model
async def test_chain_on_the_local_model() -> None:
    from cantata.models import LocalChatClient

    example = _load()
    out = io.StringIO()
    final = await example.translate("a red bicycle", LocalChatClient(), out=out)
    printed = out.getvalue()
    for name in ("[writer]", "[french]", "[spanish]", "[english]"):
        assert name in printed
    assert final.strip()
