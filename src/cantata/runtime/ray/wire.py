"""The envelope a message crosses processes in: plain JSON text, never a pickle.

Wire versions (a host refuses any other, with `SchemaVersionError` as its answer):

- 2 (agents on a pool of hosts): request/event ``{"v", "id", "recipient", "stream", "seq",
  "mv", "timeout", "msg"}`` where ``stream`` names the sending router and ``seq`` numbers
  its messages to one host, ``mv`` is the membership version the router placed it by, and
  an event names the host's subscribers it is for in ``"recipients"`` (``recipient`` is
  then None); present only when set: ``corr`` and ``cause`` (the correlation id, else the
  message's own id, and the id of the message whose handler sent it), ``sender``,
  ``topic``, ``chain``, the ids of the requests waiting on this one, outermost first;
  ``tp``, the W3C traceparent of the sender's span while tracing is on. ``msg`` is the
  message through the core type registry (`cantata.core.dumps`). A reply is
  ``{"v", "ok"}`` (the result, likewise; an event's adds ``"moved"``, the recipients that
  are not that host's), ``{"v", "err": {"type", "remote", "text", "attrs"}}`` or
  ``{"v", "moved": version}`` (the agent is not that host's under its membership: nothing
  ran, place it again).
  ``attrs`` holds the error's ``__cantata_*__`` attributes that are ints or strings (a
  workflow executor's count of events published before it failed, say), set again on the
  rebuilt error.
- 1: one Ray actor per agent; its envelope had no ``mv`` or ``recipients``, and a reply
  ``{"v", "gone": true}`` for an evicted actor.
"""

from __future__ import annotations

import builtins
from typing import Any

from ...core import CantataError, SchemaVersionError, SerializationError, dumps, loads
from ...core import errors as _errors
from . import errors as _own
from .errors import RemoteHandlerError

__all__ = ["WIRE_VERSION"]

WIRE_VERSION = 2

Envelope = dict[str, Any]


def check(envelope: Any, what: object, prefix: str = "") -> Envelope:
    """The envelope, or a typed error when it is not one this code reads, naming it as
    `prefix` and `what` (formatted only then: this runs for every message and reply)."""
    if not isinstance(envelope, dict):
        raise SerializationError(
            f"{prefix}{what} is not a JSON object but {type(envelope).__name__}"
        )
    version = envelope.get("v")
    if version != WIRE_VERSION:
        raise SchemaVersionError(
            f"{prefix}{what} {envelope.get('id', '?')!r} has wire version {version!r}; this worker "
            f"reads version {WIRE_VERSION} only: run the same cantata version on every node"
        )
    return envelope


def ok(result: Any) -> Envelope:
    return {"v": WIRE_VERSION, "ok": dumps(result)}


def failed(exc: BaseException) -> Envelope:
    cls = type(exc)
    if isinstance(exc, CantataError):
        known = (getattr(_errors, cls.__name__, None), getattr(_own, cls.__name__, None))
        name = cls.__name__ if cls in known else ""
    else:
        name = cls.__name__ if getattr(builtins, cls.__name__, None) is cls else ""
    attrs = {
        k: v
        for k, v in getattr(exc, "__dict__", {}).items()
        if k.startswith("__cantata_") and type(v) in (int, str)
    }
    return {
        "v": WIRE_VERSION,
        "err": {
            "type": name,
            "remote": f"{cls.__module__}.{cls.__qualname__}",
            "text": str(exc),
            "attrs": attrs,
        },
    }


def result(reply: Any, what: object) -> Any:
    """The value a reply carries, or its error raised (rebuilt as the same type when it is
    a cantata error or a builtin, else `RemoteHandlerError`). `what` names the request in
    an error (formatted only then)."""
    reply = check(reply, what, "the reply to ")
    if "ok" in reply:
        return loads(reply["ok"])
    err = reply.get("err")
    if not isinstance(err, dict):
        raise SerializationError(f"the reply to {what} has neither a result nor an error")
    raise rebuild(err)


def rebuild(err: dict[str, Any]) -> Exception:
    exc = _rebuild(err)
    attrs = err.get("attrs")
    if isinstance(attrs, dict):
        for key, value in attrs.items():
            if isinstance(key, str) and key.startswith("__cantata_") and type(value) in (int, str):
                setattr(exc, key, value)
    return exc


def _rebuild(err: dict[str, Any]) -> Exception:
    name, text = str(err.get("type") or ""), str(err.get("text", ""))
    cls = getattr(_errors, name, None) or getattr(_own, name, None) or getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(text)
        except Exception:  # a builtin that takes other arguments
            pass
    remote = str(err.get("remote", name))
    return RemoteHandlerError(f"the handler raised {remote}: {text}", remote_type=remote)
