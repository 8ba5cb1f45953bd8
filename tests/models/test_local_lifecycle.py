"""LocalChatClient's lifecycle and logging, on the embedded model (marker ``local_model``)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading

import pytest

from cantata.core import CancelledError, Message
from cantata.models import ChatOptions, LocalChatClient, _llama_model

pytestmark = pytest.mark.local_model

LONG = ChatOptions(
    temperature=0.0, seed=1, max_tokens=400, extra={"logit_bias": {0: -100.0, 2: -100.0}}
)
EXIT_BOUND = 60.0
"""Seconds a child process gets to exit; it takes about one when nothing hangs."""


async def test_async_with_gives_back_the_model_when_the_last_client_closes() -> None:
    async with LocalChatClient(n_ctx=640) as first, LocalChatClient(n_ctx=640) as second:
        await first.get_response([Message("user", "Hi")], options=ChatOptions(max_tokens=2))
        await second.load()
        model = first._shared()
        assert model is second._shared() and model.leases == 2
        await first.close()
        assert model.leases == 1 and model.decoder.alive
    assert model.leases == 0 and not model.decoder.alive
    assert model.key not in _llama_model._models


def _decode_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cantata-decoder"]


async def test_models_of_different_settings_decode_at_once_on_one_thread() -> None:
    """One thread steps every decoder, so llama.cpp's OpenMP teams start from one thread
    only (more makes libgomp's barriers sleep: see _batch_decoder.py)."""
    options = ChatOptions(temperature=0.0, seed=3, max_tokens=12)
    # sizes no other test uses, so that these two models are this test's alone
    async with LocalChatClient(n_ctx=704) as small, LocalChatClient(n_ctx=1088) as wide:
        models = small._shared(), wide._shared()
        assert models[0] is not models[1]
        question = [Message("user", "Name a colour.")]
        alone = await small.get_response(question, options=options)
        both = await asyncio.gather(
            small.get_response(question, options=options),
            wide.get_response(question, options=options),
            small.get_response([Message("user", "Name a fruit.")], options=options),
        )
        assert len(_decode_threads()) == 1
        assert both[0].text == alone.text and all(r.text for r in both)
        await small.close()  # the other model goes on, on the same thread
        assert (await wide.get_response(question, options=options)).text
        assert len(_decode_threads()) == 1
    assert not any(model.decoder.alive for model in models)
    if _llama_model._models:  # a model another test left open keeps the thread
        return
    for _ in range(100):  # with no model left, the thread ends at its next look (0.5 s)
        if not _decode_threads():
            break
        await asyncio.sleep(0.05)
    assert not _decode_threads()


async def test_closing_a_client_ends_its_running_requests_and_it_can_be_used_again() -> None:
    client = LocalChatClient(n_ctx=640)
    pieces: list[str] = []
    streaming = asyncio.Event()

    async def stream() -> None:
        async for update in client.get_streaming_response(
            [Message("user", "Tell a long story.")], options=LONG
        ):
            pieces.append(update.text)
            streaming.set()

    task = asyncio.create_task(stream())
    await asyncio.wait_for(streaming.wait(), 60)
    await client.close()
    with pytest.raises(CancelledError, match="closing its client"):
        await asyncio.wait_for(task, 30)
    assert len(pieces) < 400
    again = await client.get_response([Message("user", "Hi")], options=ChatOptions(max_tokens=3))
    assert again.usage is not None and again.usage.output_tokens <= 3
    await client.aclose()


@pytest.mark.parametrize("in_flight", [False, True])
def test_a_client_left_open_does_not_keep_the_interpreter_from_exiting(in_flight: bool) -> None:
    program = textwrap.dedent(
        f"""
        import asyncio
        from cantata.core import Message
        from cantata.models import ChatOptions, LocalChatClient

        async def main():
            client = LocalChatClient(n_ctx=640)
            forever = {{"logit_bias": {{0: -100.0, 2: -100.0}}}}
            options = ChatOptions(max_tokens=400 if {in_flight} else 3, extra=forever)
            question = [Message("user", "Tell a story.")]
            stream = client.get_streaming_response(question, options=options)
            await stream.__anext__()  # with 400 tokens, still decoding when the program ends
            if not {in_flight}:
                async for _ in stream:
                    pass
            print("done", flush=True)

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=EXIT_BOUND
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"


async def test_model_requests_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="cantata.models")
    async with LocalChatClient(n_ctx=640) as client:
        await client.get_response([Message("user", "Hi")], options=ChatOptions(max_tokens=3))
    messages = [r.getMessage() for r in caplog.records if r.name == "cantata.models"]
    request = next(m for m in messages if m.startswith("local request"))
    response = next(m for m in messages if m.startswith("local response"))
    assert "SmolLM2-135M-Instruct" in request and "max_tokens=3" in request
    assert "finish=" in response and "completion_tokens=" in response
