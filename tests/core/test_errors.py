"""The error hierarchy: builtin bases that keep plain `except` clauses working, fields."""

from __future__ import annotations

import builtins
import copy
import pickle
from typing import Any

import pytest

import cantata.core as core
from cantata.core import (
    CantataError,
    CantHandle,
    CheckpointError,
    ConfigurationError,
    InvalidMessageError,
    ModelHTTPError,
    ModelOutputError,
    RuntimeStateError,
    SchemaVersionError,
    SerializationError,
    ThreadError,
    Undeliverable,
    UnknownTypeError,
    UsageError,
    loads,
)
from cantata.stores import (
    StoreClosedError,
    StoreCorruptionError,
    StoreSchemaError,
    StoreTimeoutError,
)

BUILTIN_OF = [
    (UsageError, ValueError),
    (ConfigurationError, ValueError),
    (ThreadError, ValueError),
    (InvalidMessageError, ValueError),
    (RuntimeStateError, ValueError),
    (RuntimeStateError, RuntimeError),
    (SerializationError, ValueError),
    (SchemaVersionError, ValueError),
    (CheckpointError, ValueError),
    (UnknownTypeError, ValueError),
    (UnknownTypeError, builtins.TypeError),
    (ModelOutputError, ValueError),
    (core.TimeoutError, builtins.TimeoutError),
    (StoreTimeoutError, builtins.TimeoutError),
    (StoreTimeoutError, core.TimeoutError),
    (StoreClosedError, ValueError),
    (StoreSchemaError, ValueError),
    (Undeliverable, LookupError),
    (CantHandle, builtins.TypeError),
]


def make(cls: type[CantataError], message: str = "the message") -> CantataError:
    if cls is UnknownTypeError:
        return UnknownTypeError(message, type_name="x.Y")
    return cls(message)


@pytest.mark.parametrize(("cls", "builtin"), BUILTIN_OF)
def test_plain_except_clauses_catch_the_typed_error(
    cls: type[CantataError], builtin: type[Exception]
) -> None:
    try:
        raise make(cls)
    except builtin as caught:
        assert isinstance(caught, CantataError)
        assert str(caught) == "the message"


def every_error() -> list[type[CantataError]]:
    found = [getattr(core, n) for n in core.__all__]
    errors = [e for e in found if isinstance(e, type) and issubclass(e, CantataError)]
    return [*errors, StoreClosedError, StoreCorruptionError, StoreSchemaError, StoreTimeoutError]


@pytest.mark.parametrize("cls", every_error(), ids=lambda c: c.__name__)
def test_str_stays_the_message_and_args_are_unchanged(cls: type[CantataError]) -> None:
    if cls is ModelHTTPError:
        err: CantataError = ModelHTTPError("the message", status_code=500)
    else:
        err = make(cls)
    assert str(err) == "the message"
    assert err.args == ("the message",)
    assert repr(err) == f"{cls.__name__}('the message')"


@pytest.mark.parametrize(
    ("cls", "not_builtin"),
    [
        (core.RunError, ValueError),
        (core.ToolError, ValueError),
        (core.StoreError, ValueError),
        (StoreCorruptionError, ValueError),
        (core.CancelledError, ValueError),
        (core.RetryTool, ValueError),
        (ConfigurationError, builtins.TypeError),
        (ConfigurationError, LookupError),
    ],
)
def test_errors_are_not_builtins_they_do_not_mean(
    cls: type[CantataError], not_builtin: type[Exception]
) -> None:
    assert not issubclass(cls, not_builtin)


def test_keyword_fields_are_attributes() -> None:
    err = ConfigurationError("edge a -> b is there twice", source_id="a", target_id="b")
    assert err.source_id == "a"  # type: ignore[attr-defined]
    assert err.target_id == "b"  # type: ignore[attr-defined]
    assert err.fields == {"source_id": "a", "target_id": "b"}
    assert str(err) == "edge a -> b is there twice"
    assert err.args == ("edge a -> b is there twice",)


def test_an_error_without_fields_has_empty_fields() -> None:
    assert CantataError("m").fields == {}
    assert CantataError().args == ()
    assert CantataError("a", "b").args == ("a", "b")


@pytest.mark.parametrize("name", ["args", "with_traceback", "add_note", "fields"])
def test_fields_cannot_shadow_the_exception_itself(name: str) -> None:
    with pytest.raises(builtins.TypeError, match=name):
        CantataError("m", **{name: 1})


def test_existing_structured_errors_list_their_fields() -> None:
    http = ModelHTTPError("m", status_code=429, retry_after=2.0, model="small")
    assert (http.status_code, http.retry_after, http.body) == (429, 2.0, None)
    assert http.fields == {"status_code": 429, "body": None, "retry_after": 2.0, "model": "small"}
    unknown = UnknownTypeError("m", type_name="x.Y")
    assert unknown.type_name == "x.Y"
    assert unknown.fields == {"type_name": "x.Y"}


def test_timeouts_take_fields_too() -> None:
    err = core.TimeoutError("run r1 timed out", run_id="r1")
    assert err.run_id == "r1"  # type: ignore[attr-defined]
    assert str(err) == "run r1 timed out"
    assert err.errno is None


def test_errors_with_fields_copy_and_pickle() -> None:
    # Nothing in cantata pickles, but a process pool or Ray may carry an error back.
    err = ConfigurationError("m", executor_id="e1")
    for again in (copy.copy(err), pickle.loads(pickle.dumps(err))):
        assert type(again) is ConfigurationError
        assert str(again) == "m"
        assert again.executor_id == "e1"  # type: ignore[attr-defined]


def test_the_registry_error_is_caught_as_value_error() -> None:
    with pytest.raises(ValueError, match="malformed JSON"):
        loads("{")
    with pytest.raises(builtins.TypeError, match="cannot serialize"):
        core.dumps(object())


def test_a_closed_store_is_a_value_error_as_a_closed_file_is() -> None:
    import asyncio

    from cantata.stores import MemoryStore

    async def use_after_close() -> Any:
        store = MemoryStore()
        await store.close()
        return await store.get("k")

    with pytest.raises(ValueError, match="closed"):
        asyncio.run(use_after_close())


def test_errors_with_keyword_only_fields_copy_and_pickle() -> None:
    for err in (
        UnknownTypeError("m", type_name="x.Y"),
        ModelHTTPError("m", status_code=500, body={"e": 1}),
        StoreTimeoutError("m", action="put"),
    ):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err)
        assert str(again) == "m"
        assert again.args == ("m",)
        assert again.fields == err.fields
        assert copy.copy(err).fields == err.fields


def test_a_subclass_may_declare_fields_with_defaults() -> None:
    class EdgeError(ConfigurationError):
        source_id: str | None = None

        @property
        def label(self) -> str:
            return "edge"

    assert EdgeError("m").source_id is None
    assert EdgeError("m", source_id="a").source_id == "a"
    with pytest.raises(builtins.TypeError, match="label"):
        EdgeError("m", label="x")
