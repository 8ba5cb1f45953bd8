"""Copy-on-read request messages: a chat middleware changes only its request, and one that
does not read the messages costs no copies (per-turn time stays flat on a long thread)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient
from cantata.tools import ChatContext, ChatNext, FunctionInvokingChatClient, chat_middleware
from cantata.tools._request_messages import RequestMessages, request_list


def _conversation(size: int = 5) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(size)]


async def test_a_middleware_that_reads_nothing_costs_no_copy() -> None:
    @chat_middleware
    async def passing(context: ChatContext, call_next: ChatNext) -> None:
        await call_next()

    client = ScriptedChatClient(["ok"])
    history = _conversation()
    await FunctionInvokingChatClient(client, middleware=[passing]).get_response(history)
    sent = client.calls[0].messages
    assert all(a is b for a, b in zip(sent, history, strict=True))


async def test_what_a_middleware_changes_reaches_the_model_only() -> None:
    @chat_middleware
    async def tagging(context: ChatContext, call_next: ChatNext) -> None:
        context.messages[-1].metadata["tag"] = 1
        context.messages[0].contents.append(context.messages[0].contents[0])
        context.messages = [Message("system", "be brief"), *context.messages]
        await call_next()

    client = ScriptedChatClient(["ok"])
    history = _conversation()
    snapshot = copy.deepcopy(history)
    await FunctionInvokingChatClient(client, middleware=[tagging]).get_response(history)
    sent = client.calls[0].messages
    assert sent[0].text == "be brief" and sent[-1].metadata == {"tag": 1}
    assert sent[1].text == "m0m0"
    assert history == snapshot  # the caller's messages are untouched
    assert sent[2] is not history[1] and sent[2] == history[1]  # read by the splat: a copy


def test_each_original_is_copied_once_whichever_way_it_is_read() -> None:
    history = _conversation()
    messages = RequestMessages(history)
    first = messages[0]
    assert first is not history[0] and first == history[0]
    assert messages[0] is first and messages[:1][0] is first and next(iter(messages)) is first
    first.metadata["x"] = 1
    assert history[0].metadata == {}
    assert request_list(messages)[0] is first
    assert request_list(messages)[1] is history[1]  # never read: the original
    assert list(reversed(messages))[-1] is first
    prepended = [Message("system", "s")] + messages  # noqa: RUF005 - the + is tested
    assert prepended[1] is first and prepended[2] is not history[1]
    popped = messages.pop()
    assert popped is not history[-1] and popped == history[-1]
    assert len(request_list(messages)) == len(history) - 1


def test_sorting_copying_and_pickling_hand_out_copies() -> None:
    history = _conversation()
    messages = RequestMessages(history)
    messages.sort(key=lambda m: m.text, reverse=True)
    assert [m.text for m in messages] == ["m4", "m3", "m2", "m1", "m0"]
    assert all(m is not h for m in request_list(messages) for h in history)
    copied = copy.copy(RequestMessages(history))
    assert all(a is not b for a, b in zip(copied, history, strict=True))


@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["get", "slice", "set", "del", "insert", "pop"]), st.integers(0, 6)
        ),
        max_size=12,
    )
)
def test_any_edit_leaves_the_originals_and_matches_a_plain_list(ops: list[Any]) -> None:
    history = _conversation(6)
    snapshot = copy.deepcopy(history)
    lazy = RequestMessages(history)
    plain = [m.copy() for m in history]
    for op, index in ops:
        if not plain:
            break
        i = index % len(plain)
        if op == "get":
            lazy[i].metadata["seen"] = True
            plain[i].metadata["seen"] = True
        elif op == "slice":
            for m in lazy[i:]:
                m.metadata["sliced"] = True
            for m in plain[i:]:
                m.metadata["sliced"] = True
        elif op == "set":
            lazy[i] = Message("user", "new")
            plain[i] = Message("user", "new")
        elif op == "del":
            del lazy[i]
            del plain[i]
        elif op == "insert":
            lazy.insert(i, Message("tool"))
            plain.insert(i, Message("tool"))
        else:
            lazy.pop(i).metadata["popped"] = True
            plain.pop(i)
    shape = [(m.role, m.text, m.metadata) for m in request_list(lazy)]
    assert shape == [(m.role, m.text, m.metadata) for m in plain]
    assert history == snapshot
    assert request_list(lazy) is not lazy


async def test_options_still_belong_to_one_call() -> None:
    seen: list[float | None] = []

    @chat_middleware
    async def hot(context: ChatContext, call_next: ChatNext) -> None:
        seen.append(context.options.temperature)
        context.options.temperature = 2.0
        await call_next()

    client = ScriptedChatClient(["a", "b"])
    loop = FunctionInvokingChatClient(client, middleware=[hot])
    options = ChatOptions(temperature=0.1)
    await loop.get_response(_conversation(), options=options)
    await loop.get_response(_conversation(), options=options)
    assert seen == [0.1, 0.1] and options.temperature == 0.1
