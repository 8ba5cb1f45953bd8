"""Turning chat messages into prompt tokens exactly as llama-cpp-python's chat handlers do.

The batched decoder does not call ``create_chat_completion``, but the prompt a model sees must
not depend on that: a chat handler is asked to render the request on a stand-in for the
``Llama`` object that records the completion it would start (prompt tokens, stop strings,
stopping criteria) instead of starting it. So every chat format llama-cpp-python knows, and
the model's own template, renders the same way in both paths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import ConfigurationError

StopCheck = Callable[[Any, Any], bool]


@dataclass(slots=True)
class RenderedPrompt:
    """What a chat handler would have asked llama.cpp to complete."""

    tokens: list[int]
    stop: list[str] = field(default_factory=list)
    stopping_criteria: StopCheck | None = None


class _Captured(Exception):
    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("completion captured")
        self.kwargs = kwargs


class _Recorder:
    """Looks like the `Llama` object to a chat handler; stops it at `create_completion`."""

    def __init__(self, llama: Any) -> None:
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, **kwargs: Any) -> Any:
        raise _Captured(kwargs)


def chat_handler(llama: Any) -> Any:
    """The chat handler ``create_chat_completion`` would use for this model."""
    from llama_cpp import llama_chat_format

    handler = llama.chat_handler or llama._chat_handlers.get(llama.chat_format)
    if handler is None:
        handler = llama_chat_format.get_chat_completion_handler(llama.chat_format)
    return handler


def render_prompt(llama: Any, handler: Any, messages: list[dict[str, Any]]) -> RenderedPrompt:
    """The prompt tokens and stop conditions of `messages` under the model's chat format."""
    try:
        handler(llama=_Recorder(llama), messages=messages, stream=True)
    except _Captured as captured:
        return _rendered(captured.kwargs)
    except ValueError as exc:  # a template's raise_exception, e.g. roles out of order
        raise ConfigurationError(
            f"the chat format {llama.chat_format!r} cannot render these messages: {exc}"
        ) from exc
    raise ConfigurationError(
        f"the chat format {llama.chat_format!r} does not render a plain completion, which "
        "LocalChatClient needs; pass chat_format= one of llama-cpp-python's text formats "
        "(for example 'chatml')"
    )


def _rendered(kwargs: dict[str, Any]) -> RenderedPrompt:
    prompt = kwargs.get("prompt")
    if not isinstance(prompt, list):
        raise ConfigurationError(
            "the chat format rendered a text prompt instead of tokens; pass chat_format= one "
            "of llama-cpp-python's built-in formats"
        )
    stop = kwargs.get("stop") or []
    stops = [stop] if isinstance(stop, str) else [s for s in stop if s]
    return RenderedPrompt([int(t) for t in prompt], stops, kwargs.get("stopping_criteria"))
