"""What the drain tests serve in a `cantata serve` subprocess (``tests/serve/_slow.py:agents``):
``slow`` streams a word every 50 ms for minutes; ``quick`` streams ten words, 50 ms apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from cantata.agents import ChatAgent
from cantata.core import CancellationToken, Message
from cantata.models import ChatOptions, ChatResponseUpdate, ScriptedChatClient


class _Paced(ScriptedChatClient):
    """The scripted model, one chunk every 50 ms (a model that takes its time)."""

    async def get_streaming_response(  # type: ignore[override]
        self,
        messages: Sequence[Message],
        *,
        options: ChatOptions | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        stream = super().get_streaming_response(
            messages, options=options, cancellation_token=cancellation_token
        )
        async for update in stream:
            await asyncio.sleep(0.05)
            yield update


agents = {
    "slow": ChatAgent(_Paced(lambda m, o: "word " * 5000, chunk_size=5), name="slow"),
    "quick": ChatAgent(_Paced(lambda m, o: "word " * 10, chunk_size=5), name="quick"),
}
