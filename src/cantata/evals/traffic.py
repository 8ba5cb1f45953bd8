"""Recorded traffic as a dataset: the answers a served app gave become the cases of an eval.

A served app records its traffic when its model is a `RecordingChatClient` (in a spec,
``model: {provider: cantata.models.RecordingChatClient, inner: ..., path: traffic.json}``):
every model call of every request is written to the cassette. Each recorded call that
ended in an answer (not in tool calls) is one exchange: the conversation up to its last
user message is the case's input (system messages left out, since they are the agent's
own instructions), the answer is `expected`, and the tool calls made since that user
message become a `Trajectory` the case expects. The same cassette then replays the app
offline (`ReplayChatClient`), so the dataset and its answers come from one recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import CantataError, FunctionCallContent, Message, from_json
from ..models import Cassette
from .context import Case
from .dataset import Dataset
from .errors import DatasetError
from .evaluators import ExpectedCall, Trajectory

__all__ = ["dataset_from_cassette"]


def dataset_from_cassette(
    cassette: Cassette | str | Path,
    *,
    name: str | None = None,
    trajectory: bool = True,
    dedupe: bool = True,
) -> Dataset:
    """The exchanges recorded in `cassette` (a file, or one loaded) as a dataset.

    With `trajectory`, a case whose answer came after tool calls expects those calls (in
    order, with their arguments). With `dedupe`, an input recorded twice (a retried
    request, a repeated eval) is kept once, with its first answer.
    """
    path = None if isinstance(cassette, Cassette) else str(cassette)
    try:
        recorded = cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)
    except CantataError as exc:
        raise DatasetError(f"the recording cannot be read: {exc}", path=path) from None
    cases: list[Case] = []
    seen: set[str] = set()
    for n, interaction in enumerate(recorded.interactions):
        response = interaction.response
        if response is None or response.function_calls or not response.text:
            continue
        messages = _messages(interaction.request, n)
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last_user is None:
            continue
        turn = [m for m in messages[: last_user + 1] if m.role in ("user", "assistant")
                and m.text and not m.function_calls]  # fmt: skip
        value: Any = (
            turn[-1].text if len(turn) == 1 else [{"role": m.role, "content": m.text} for m in turn]
        )
        key = repr(value)
        if dedupe and key in seen:
            continue
        seen.add(key)
        calls = [
            ExpectedCall(
                name=c.name, arguments=c.arguments if isinstance(c.arguments, dict) else None
            )
            for m in messages[last_user + 1 :]
            for c in m.contents
            if isinstance(c, FunctionCallContent)
        ]
        evaluators = (Trajectory(calls=calls),) if trajectory and calls else ()
        metadata = {"source": "recording", "interaction": n}
        if response.model:
            metadata["model"] = response.model
        cases.append(Case(f"exchange-{len(cases) + 1}", value, response.text, metadata, evaluators))
    if not cases:
        raise DatasetError("the recording holds no answered exchange", path=path)
    stem = Path(path).stem if path else "recording"
    return Dataset(cases, name=name or stem, path=path)


def _messages(request: dict[str, Any], n: int) -> list[Message]:
    raw = request.get("messages")
    if not isinstance(raw, list):
        raise DatasetError(f"interaction {n} of the recording has no messages")
    out = []
    for item in raw:
        try:
            message = from_json({**item, "id": "recorded"}) if isinstance(item, dict) else None
        except CantataError as exc:
            raise DatasetError(f"interaction {n} of the recording: {exc}") from None
        if not isinstance(message, Message):
            raise DatasetError(f"interaction {n} of the recording holds a non-message")
        out.append(message)
    return out
