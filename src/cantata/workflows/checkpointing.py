"""Saving a run at a superstep boundary, and rebuilding a run from a checkpoint.

Saving writes only what changed since the run's previous checkpoint: values of shared-state
keys and executor states that were written (each under a fresh reference), and log entries
appended since (to this branch's segment of each log). Everything else is carried over as
references and lengths, so the record stays small however long a conversation gets.

Every value and log entry is written sealed (`cantata.stores.seal`: with the SHA-256 of its
canonical JSON) and checked when read back, as the record is by the store: a checkpoint
damaged in any way that still parses is refused with `CheckpointError`, never resumed into
a different run.
"""

from __future__ import annotations

import datetime as _dt
import operator
from typing import TYPE_CHECKING, Any

from ..core import (
    CheckpointError,
    Message,
    SerializationError,
    StoreError,
    from_json,
    new_id,
    registry,
    short_repr,
    to_json,
)
from ..stores import seal, unseal
from ._agent_messages import CONVERSATION, AgentExecutorResponse
from .checkpoint import WorkflowCheckpoint
from .context import PendingRequest
from .runner import Delivery, RunState

if TYPE_CHECKING:
    from .checkpoint_store import CheckpointStore
    from .graph import WorkflowGraph

__all__ = ["restore_run", "save_checkpoint"]

_RESTING = frozenset({"in_progress", "idle", "idle_with_pending_requests"})
NONE_REF = "none"
"""The reference of a value that is None. A store cannot tell a null value from a missing
one, so None is never written; generated references are 32 hex digits, never this."""
OUTPUTS = "outputs"  # not a valid log key ("<owner>/<name>"), so it never collides


def _segment_appends(
    run: RunState, key: str, entries: list[Any], appends: dict[str, tuple[int, list[Any]]]
) -> None:
    """Queue the entries of a logical log not saved yet onto this branch's segment."""
    saved = run.saved.get(key, 0)
    new = entries[saved:]
    if not new:
        return
    segments = run.segments.setdefault(key, [])
    own = f"{run.run_id}:{run.branch}:{key}"
    if not segments or segments[-1][0] != own:
        segments.append((own, 0))
    name, count = segments[-1]
    appends[name] = (count, [seal(to_json(e)) for e in new])
    segments[-1] = (name, count + len(new))


async def save_checkpoint(workflow: WorkflowGraph, run: RunState, store: CheckpointStore) -> str:
    """Save the run as it stands at this boundary; returns the new checkpoint id.

    A save that fails (a value the registry cannot write, a store error) changes nothing in
    the run's bookkeeping, and later saves append to a new branch of each log: whatever the
    failed save may have appended is never counted.
    """
    previous = {k: list(v) for k, v in run.segments.items()}
    try:
        checkpoint, values, appends = _build(workflow, run)
        await store.save(checkpoint, values=values, log_appends=appends)
    except BaseException:
        run.segments = previous
        run.branch = new_id()[:12]
        raise
    run.state_refs, run.executor_refs = checkpoint.state_refs, checkpoint.executor_refs
    run.dirty_state.clear()
    run.dirty_executors.clear()
    for key, entries in run.logs.items():
        run.saved[key] = len(entries)
    run.saved[OUTPUTS] = len(run.outputs)
    run.checkpoint_id = checkpoint.checkpoint_id
    return checkpoint.checkpoint_id


_BUILTIN_TYPES: dict[str, type] = {
    t.__name__: t
    for t in (bool, int, float, str, bytes, list, dict, tuple, set, frozenset, type(None))
}


def _request(workflow: WorkflowGraph, r: PendingRequest) -> dict[str, Any]:
    """A pending request as JSON, with the answer type it asked for when that is not the
    one its response handler declares (a builtin or registered class; other annotations
    fall back to the handler's on restore)."""
    item = {"request_id": r.request_id, "executor_id": r.executor_id, "data": to_json(r.data)}
    rtype = r.response_type
    if rtype is not None and rtype != workflow.executors[r.executor_id]._response_type_for(r.data):
        if isinstance(rtype, type) and _BUILTIN_TYPES.get(rtype.__name__) is rtype:
            item["response_type"] = rtype.__name__
        elif isinstance(rtype, type) and registry.is_registered(rtype):
            item["response_type"] = registry.name_of(rtype)
    return item


def _response_type(workflow: WorkflowGraph, item: dict[str, Any], data: Any) -> Any:
    name = item.get("response_type")
    if name is None:
        return workflow.executors[item["executor_id"]]._response_type_for(data)
    if not isinstance(name, str):
        raise CheckpointError(f"a request's response_type must be a type name, not {name!r}")
    return _BUILTIN_TYPES.get(name) or registry.type_named(name)


def _build(
    workflow: WorkflowGraph, run: RunState
) -> tuple[WorkflowCheckpoint, dict[str, Any], dict[str, tuple[int, list[Any]]]]:
    """The record, the new values and the log appends of a save (advances run.segments)."""
    values: dict[str, Any] = {}
    state_refs = dict(run.state_refs)
    for key in run.dirty_state:
        state_refs[key] = _write_value(run.state[key], values)
    executor_refs = dict(run.executor_refs)
    for eid in run.dirty_executors:
        executor_refs[eid] = _write_value(run.executor_states[eid], values)
    appends: dict[str, tuple[int, list[Any]]] = {}
    for key, entries in run.logs.items():
        _segment_appends(run, key, entries, appends)
    _segment_appends(run, OUTPUTS, run.outputs, appends)
    status = "in_progress"
    if not run.pending:
        status = "idle_with_pending_requests" if run.requests else "idle"
    fan_in: dict[str, dict[str, list[Any]]] = {}
    fan_in_refs: dict[str, dict[str, list[Any]]] = {}
    for group, buffers in run.fan_in.items():
        fan_in[group] = {}
        for source, messages in buffers.items():
            refs = [_reference(run, m) for m in messages]
            fan_in[group][source] = [
                to_json(m if r is None else _light(m)) for m, r in zip(messages, refs, strict=True)
            ]
            if any(r is not None for r in refs):
                fan_in_refs.setdefault(group, {})[source] = refs
    checkpoint = WorkflowCheckpoint(
        checkpoint_id=new_id(),
        run_id=run.run_id,
        workflow_name=workflow.name,
        superstep=run.superstep,
        parent_id=run.checkpoint_id,
        created_at=_dt.datetime.now(_dt.UTC).isoformat(),
        status=status,
        messages=[_delivery(run, d) for d in run.pending],
        fan_in=fan_in,
        fan_in_refs=fan_in_refs,
        state_refs=state_refs,
        executor_refs=executor_refs,
        requests=[_request(workflow, r) for r in run.requests.values()],
        logs={k: list(v) for k, v in run.segments.items() if k != OUTPUTS},
        outputs=list(run.segments.get(OUTPUTS, [])),
        executor_ids=sorted(workflow.executors),
        graph=workflow._graph,
    )
    return checkpoint, values, appends


def _write_value(value: Any, values: dict[str, Any]) -> str:
    if value is None:
        return NONE_REF
    ref = new_id()
    values[ref] = seal(to_json(value))
    return ref


def _opened(data: Any, sealed: bool, where: str) -> Any:
    """A stored value or entry, its seal checked (version 1 checkpoints have none)."""
    if not sealed:
        return data
    try:
        return unseal(data, where=where)
    except StoreError as exc:
        raise CheckpointError(str(exc)) from exc


async def _read_value(store: CheckpointStore, ref: str, ckpt: WorkflowCheckpoint) -> Any:
    if ref == NONE_REF:
        return None
    where = f"value {short_repr(ref)} of checkpoint {ckpt.checkpoint_id!r}"
    return from_json(_opened(await store.read_value(ref), ckpt.sealed, where))


def _delivery(run: RunState, d: Delivery) -> dict[str, Any]:
    """A delivery as JSON. An agent executor's response whose full conversation is its
    sender's conversation log (or a prefix of it) is written as a reference into that log,
    alone or in the list a fan-in delivers: otherwise every hop of an agent chain (every
    round of a fan-in of agents) would save the whole conversation once more."""
    item: dict[str, Any] = {"target": d.target, "sources": d.sources}
    message = d.message
    ref = _reference(run, message)
    if ref is not None:
        item["message"] = to_json(_light(message))
        item["conversation"] = ref
        return item
    if type(message) is list and message and type(message[0]) is AgentExecutorResponse:
        refs = [_reference(run, m) for m in message]
        if any(r is not None for r in refs):
            item["message"] = [
                to_json(m if r is None else _light(m)) for m, r in zip(message, refs, strict=True)
            ]
            item["conversations"] = refs
            return item
    item["message"] = to_json(message)
    return item


def _reference(run: RunState, message: Any) -> dict[str, Any] | None:
    if type(message) is not AgentExecutorResponse:
        return None
    key = f"{message.executor_id}/{CONVERSATION}"
    log = run.logs.get(key)
    full = message.full_conversation
    if log is not None and len(full) <= len(log) and all(map(operator.is_, full, log)):
        return {"log": key, "length": len(full)}
    return None


def _light(message: AgentExecutorResponse) -> AgentExecutorResponse:
    return AgentExecutorResponse(message.executor_id, message.agent_response, [])


def _conversation_from_log(
    run: RunState, message: Any, item: dict[str, Any], ckpt: WorkflowCheckpoint
) -> Any:
    ref = item.get("conversation")
    if ref is not None:
        return _with_conversation(run, message, ref, ckpt)
    refs = item.get("conversations")
    if refs is None:
        return message
    if not isinstance(refs, list) or not isinstance(message, list) or len(refs) != len(message):
        raise CheckpointError(
            f"checkpoint {ckpt.checkpoint_id!r} is damaged: a delivery's conversations "
            "do not match its list of responses"
        )
    return [
        m if r is None else _with_conversation(run, m, r, ckpt)
        for m, r in zip(message, refs, strict=True)
    ]


def _with_conversation(run: RunState, message: Any, ref: Any, ckpt: WorkflowCheckpoint) -> Any:
    key = ref.get("log") if isinstance(ref, dict) else None
    log = run.logs.get(key) if isinstance(key, str) else None
    length = ref.get("length") if isinstance(ref, dict) else None
    if (
        type(message) is not AgentExecutorResponse
        or log is None
        or type(length) is not int
        or not 0 <= length <= len(log)
    ):
        raise CheckpointError(
            f"checkpoint {ckpt.checkpoint_id!r} is damaged: a delivery refers to a "
            f"conversation {ref!r} it does not hold"
        )
    message.full_conversation = log[:length]
    return message


async def restore_run(
    workflow: WorkflowGraph, store: CheckpointStore, checkpoint_id: str
) -> RunState:
    """Rebuild a run from a checkpoint; later saves follow it (lineage) on a new branch."""
    ckpt = await store.load(checkpoint_id)
    where = f"checkpoint {checkpoint_id!r}"
    missing = sorted(set(ckpt.executor_ids) - set(workflow.executors))
    if ckpt.workflow_name != workflow.name or missing:
        raise CheckpointError(
            f"{where} was made by workflow {ckpt.workflow_name!r} with executors "
            f"{ckpt.executor_ids}; it cannot resume workflow {workflow.name!r} with executors "
            f"{sorted(workflow.executors)}: resume it with the workflow that made it"
        )
    if ckpt.graph and ckpt.graph != workflow._graph:
        raise CheckpointError(
            f"{where} was made by a workflow {workflow.name!r} whose edges differ from this "
            "one's (other edges, or the same added in another order): resume it with the "
            "workflow that made it"
        )
    try:
        return await _rebuild(workflow, store, ckpt)
    except SerializationError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{where} cannot be loaded: {exc}") from exc


async def _rebuild(
    workflow: WorkflowGraph, store: CheckpointStore, ckpt: WorkflowCheckpoint
) -> RunState:
    run = RunState(ckpt.run_id, superstep=ckpt.superstep, checkpoint_id=ckpt.checkpoint_id)
    if ckpt.status in _RESTING:
        run.status = ckpt.status  # type: ignore[assignment]  # checked just above
    for key, ref in ckpt.state_refs.items():
        run.state[key] = await _read_value(store, ref, ckpt)
    for eid, ref in ckpt.executor_refs.items():
        _known(workflow, eid, ckpt)
        run.executor_states[eid] = await _read_value(store, ref, ckpt)
    run.state_refs = dict(ckpt.state_refs)
    run.executor_refs = dict(ckpt.executor_refs)
    for key, segments in ckpt.logs.items():
        eid = key.partition("/")[0]
        if eid != "*":
            _known(workflow, eid, ckpt)
        entries = await _read_segments(store, segments, ckpt)
        run.logs[key] = entries
        run.segments[key] = list(segments)
        run.saved[key] = len(entries)
    _check_message_logs(workflow, run, ckpt)
    run.outputs = await _read_segments(store, ckpt.outputs, ckpt)
    run.segments[OUTPUTS] = list(ckpt.outputs)
    run.saved[OUTPUTS] = len(run.outputs)
    for item in ckpt.messages:
        _known(workflow, item["target"], ckpt)
        message = _conversation_from_log(run, from_json(item["message"]), item, ckpt)
        if not workflow.executors[item["target"]].can_handle(message):
            raise CheckpointError(
                f"checkpoint {ckpt.checkpoint_id!r} is damaged: it holds a "
                f"{type(message).__name__} for executor {item['target']!r}, which takes none"
            )
        run.pending.append(Delivery(item["target"], message, item["sources"]))
    groups = {g.id for g in workflow._fan_ins}
    for group, buffers in ckpt.fan_in.items():
        if group not in groups:
            raise CheckpointError(
                f"checkpoint {ckpt.checkpoint_id!r} is damaged: it names fan-in {group!r}, "
                f"which workflow {workflow.name!r} does not have"
            )
        refs = ckpt.fan_in_refs.get(group, {})
        run.fan_in[group] = {
            s: _conversation_from_log(
                run, [from_json(m) for m in ms], {"conversations": refs.get(s)}, ckpt
            )
            for s, ms in buffers.items()
        }
    for item in ckpt.requests:
        eid = item["executor_id"]
        _known(workflow, eid, ckpt)
        data = from_json(item["data"])
        rtype = _response_type(workflow, item, data)
        run.requests[item["request_id"]] = PendingRequest(item["request_id"], eid, data, rtype)
    return run


def _check_message_logs(workflow: WorkflowGraph, run: RunState, ckpt: WorkflowCheckpoint) -> None:
    """Agent executors' states, conversations and threads must be theirs: damaged ones are
    refused here rather than given to a model."""
    from .agent_executor import AgentExecutor, AgentExecutorState

    for ex in workflow.executors.values():
        if not isinstance(ex, AgentExecutor):
            continue
        state = run.executor_states.get(ex.id)
        if state is not None and not isinstance(state, AgentExecutorState):
            raise CheckpointError(
                f"checkpoint {ckpt.checkpoint_id!r} is damaged: the state of agent executor "
                f"{ex.id!r} is a {type(state).__name__}, not an AgentExecutorState"
            )
        for key in (f"{ex.id}/{CONVERSATION}", f"*/{ex._thread_key}"):
            if not all(isinstance(m, Message) for m in run.logs.get(key, ())):
                raise CheckpointError(
                    f"checkpoint {ckpt.checkpoint_id!r} is damaged: log {key!r} of agent "
                    f"executor {ex.id!r} holds entries that are not messages"
                )


async def _read_segments(
    store: CheckpointStore, segments: list[tuple[str, int]], ckpt: WorkflowCheckpoint
) -> list[Any]:
    entries: list[Any] = []
    for name, count in segments:
        where = f"an entry of log {short_repr(name)} of checkpoint {ckpt.checkpoint_id!r}"
        entries.extend(
            from_json(_opened(e, ckpt.sealed, where)) for e in await store.read_log(name, count)
        )
    return entries


def _known(workflow: WorkflowGraph, executor_id: str, ckpt: WorkflowCheckpoint) -> None:
    if executor_id not in workflow.executors:
        raise CheckpointError(
            f"checkpoint {ckpt.checkpoint_id!r} is damaged: it names executor {executor_id!r}, "
            f"which workflow {workflow.name!r} does not have"
        )
