"""The peers' instant model clients, shared by the team benchmarks (bench_teams.py and
bench_teams_handoff.py).

Each peer team runs its own agent class on a model client of its own protocol that answers
at once, so what is timed is the team machinery, as cantata's `ScriptedChatClient` does for
ours. Imported only when the peer is installed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

__all__ = ["agent_framework_client", "autogen_client", "quiet_agent_framework"]


def autogen_client(
    answer: Callable[[], Any], *, function_calling: bool = False, finish_reason: str = "stop"
) -> Any:
    """An AutoGen `ChatCompletionClient` whose every request is answered at once with
    `answer()` (a text, or a list of `FunctionCall`s with ``finish_reason="function_calls"``)."""
    from autogen_core.models import (
        ChatCompletionClient,
        CreateResult,
        ModelFamily,
        ModelInfo,
        RequestUsage,
    )

    class InstantClient(ChatCompletionClient):  # type: ignore[misc]
        """Answers every request at once."""

        _info = ModelInfo(
            vision=False,
            function_calling=function_calling,
            json_output=False,
            family=ModelFamily.UNKNOWN,
            structured_output=False,
        )

        async def create(self, messages: Sequence[Any], **kwargs: Any) -> CreateResult:
            return CreateResult(
                finish_reason=finish_reason,
                content=answer(),
                usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
                cached=False,
            )

        def create_stream(self, messages: Sequence[Any], **kwargs: Any) -> AsyncGenerator[Any]:
            async def gen() -> AsyncGenerator[Any]:
                yield await self.create(messages)

            return gen()

        async def close(self) -> None:
            pass

        def actual_usage(self) -> RequestUsage:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        def total_usage(self) -> RequestUsage:
            return RequestUsage(prompt_tokens=0, completion_tokens=0)

        def count_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
            return 0

        def remaining_tokens(self, messages: Sequence[Any], **kwargs: Any) -> int:
            return 1_000_000

        @property
        def capabilities(self) -> Any:
            return self._info

        @property
        def model_info(self) -> ModelInfo:
            return self._info

    return InstantClient()


def quiet_agent_framework() -> None:
    """Agent Framework's orchestrators log warnings at every run's end: quiet them."""
    logging.getLogger("agent_framework").setLevel(logging.ERROR)
    logging.getLogger("agent_framework_orchestrations").setLevel(logging.ERROR)


def agent_framework_client(content: Callable[[], Any]) -> Any:
    """An Agent Framework chat client that answers each request at once with one assistant
    message holding `content()` (a `Content`), with the function loop layers an `Agent`
    normally has."""
    from agent_framework import (
        BaseChatClient,
        ChatMiddlewareLayer,
        ChatResponse,
        FunctionInvocationLayer,
    )
    from agent_framework import Message as AFMessage
    from agent_framework.observability import ChatTelemetryLayer

    class InstantClient(  # type: ignore[misc]
        ChatMiddlewareLayer, FunctionInvocationLayer, ChatTelemetryLayer, BaseChatClient
    ):
        """Answers at once."""

        def _inner_get_response(
            self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
        ) -> Any:
            async def answer() -> Any:
                return ChatResponse(messages=[AFMessage(role="assistant", contents=[content()])])

            return answer()

    return InstantClient()
