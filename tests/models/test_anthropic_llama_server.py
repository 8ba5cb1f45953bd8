"""AnthropicChatClient against llama.cpp's own ``llama-server`` and its ``/v1/messages``, for
real: a whole answer with usage, and a stream that folds into the same kind of answer."""

from __future__ import annotations

import pytest

from cantata.core import Message
from cantata.models import AnthropicChatClient, ChatOptions, ChatResponse

from ._llama_server import native_llama_server


@pytest.mark.openai_server
async def test_messages_api_answer_and_stream() -> None:
    with native_llama_server() as url:
        async with AnthropicChatClient("smollm2", base_url=url, max_retries=0, timeout=120) as c:
            whole = await c.get_response(
                [Message("system", "Be brief."), Message("user", "Name a color.")],
                options=ChatOptions(max_tokens=16, temperature=0),
            )
            updates = [
                u
                async for u in c.get_streaming_response(
                    [Message("user", "Count to five.")], options=ChatOptions(max_tokens=16)
                )
            ]
    assert whole.text.strip() and whole.finish_reason in ("stop", "length")
    assert whole.usage is not None and whole.usage.output_tokens > 0
    assert whole.usage.input_tokens >= whole.usage.cached_input_tokens
    streamed = ChatResponse.from_updates(updates)
    assert len([u for u in updates if u.text]) > 1 and streamed.text.strip()
    assert streamed.usage is not None and streamed.usage.output_tokens > 0
    assert streamed.finish_reason in ("stop", "length")
