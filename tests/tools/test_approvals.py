"""Approval: calls that need a person's yes stop the loop; answers resume it."""

from __future__ import annotations

from typing import Any

import pytest

from cantata.core import (
    ApprovalRequired,
    FunctionApprovalRequestContent,
    FunctionApprovalResponseContent,
    FunctionResultContent,
    Message,
    TextContent,
)
from cantata.models import ChatResponse, ScriptedChatClient, tool_call
from cantata.tools import FunctionInvokingChatClient, ToolContext, tool
from cantata.tools._approvals import (
    Verdict,
    insert_results,
    missing_call_message,
    model_view,
    pending_approvals,
)

deleted: list[str] = []
APPROVAL_TYPES = (FunctionApprovalRequestContent, FunctionApprovalResponseContent)


@tool(approval_mode="always_require")
def delete_file(path: str, ctx: ToolContext) -> str:
    """Delete a file (needs approval)."""
    assert ctx.approved
    deleted.append(path)
    return f"deleted {path}"


@tool
def list_files() -> list[str]:
    """List files."""
    return ["a.txt", "b.txt"]


@tool
def transfer(amount: int, ctx: ToolContext) -> str:
    """Move money; large amounts need approval."""
    if amount > 100 and not ctx.approved:
        raise ApprovalRequired(f"transfer of {amount} needs approval")
    return f"sent {amount}"


def make(script: Any) -> tuple[FunctionInvokingChatClient, ScriptedChatClient]:
    deleted.clear()
    inner = ScriptedChatClient(script)
    return FunctionInvokingChatClient(inner, tools=[delete_file, list_files, transfer]), inner


def approvals_in(response: ChatResponse) -> list[FunctionApprovalRequestContent]:
    return [c for c in response.messages[-1].contents if type(c) is FunctionApprovalRequestContent]


async def test_a_tool_that_requires_approval_is_not_run() -> None:
    delete = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    listing = tool_call("list_files", call_id="l1")
    client, inner = make([[listing, delete], "unused"])
    response = await client.get_response([Message("user", "clean up")])

    assert response.finish_reason == "approval_required"
    assert [m.role for m in response.messages] == ["assistant", "tool", "assistant"]
    # the call that needs no approval ran, and its result is in the messages
    assert response.messages[1].contents == [FunctionResultContent("l1", ["a.txt", "b.txt"])]
    [request] = approvals_in(response)
    assert request.function_call == delete
    assert deleted == []
    assert inner.remaining == 1


async def test_a_tool_can_ask_for_approval_by_raising() -> None:
    small = tool_call("transfer", {"amount": 5}, call_id="t1")
    large = tool_call("transfer", {"amount": 500}, call_id="t2")
    client, _ = make([[small, large]])
    response = await client.get_response([Message("user", "pay")])
    assert response.finish_reason == "approval_required"
    assert response.messages[1].contents == [FunctionResultContent("t1", "sent 5")]
    assert [r.function_call.call_id for r in approvals_in(response)] == ["t2"]


async def test_approved_calls_run_rejected_ones_get_an_error_and_the_model_continues() -> None:
    keep = tool_call("delete_file", {"path": "keep.txt"}, call_id="d1")
    drop = tool_call("delete_file", {"path": "junk.txt"}, call_id="d2")
    client, inner = make([[keep, drop], "done"])
    history = [Message("user", "clean up")]
    first = await client.get_response(history)
    history += first.messages
    requests = {r.function_call.call_id: r for r in approvals_in(first)}
    history.append(
        Message(
            "user", [requests["d1"].create_response(False), requests["d2"].create_response(True)]
        )
    )

    second = await client.get_response(history)

    assert deleted == ["junk.txt"]
    assert [m.role for m in second.messages] == ["tool", "assistant"]
    assert second.messages[0].contents == [
        FunctionResultContent("d1", error="the user rejected this call"),
        FunctionResultContent("d2", "deleted junk.txt"),
    ]
    assert second.text == "done" and second.finish_reason == "stop"
    # the model saw the calls followed by their results, and no approval contents
    sent = inner.calls[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool"]
    assert all(
        type(c) not in (FunctionApprovalRequestContent, FunctionApprovalResponseContent)
        for m in sent
        for c in m.contents
    )


async def test_an_approved_tool_that_asks_again_gets_an_error_result() -> None:
    @tool
    def stubborn() -> None:
        """Always wants approval."""
        raise ApprovalRequired("again")

    call = tool_call("stubborn", call_id="s1")
    inner = ScriptedChatClient(["ok"])
    client = FunctionInvokingChatClient(inner, tools=[stubborn])
    history = [
        Message("user", "go"),
        Message("assistant", [call]),
        Message("assistant", [FunctionApprovalRequestContent("s1", call)]),
        Message("user", [FunctionApprovalResponseContent("s1", call, approved=True)]),
    ]
    response = await client.get_response(history)
    error = response.messages[0].function_results[0].error
    assert error is not None and "asked for approval again" in error


async def test_answers_whose_calls_already_have_results_are_not_run_twice() -> None:
    call = tool_call("delete_file", {"path": "x"}, call_id="d1")
    client, _ = make(["ok"])
    history = [
        Message("assistant", [call]),
        Message("assistant", [FunctionApprovalRequestContent("d1", call)]),
        Message("user", [FunctionApprovalResponseContent("d1", call, approved=True)]),
        Message("tool", [FunctionResultContent("d1", "deleted x")]),
        Message("user", [FunctionApprovalResponseContent("d1", call, approved=True)]),
    ]
    response = await client.get_response(history)
    assert deleted == []
    assert [m.role for m in response.messages] == ["assistant"]


async def test_streaming_stops_with_the_same_approval_request() -> None:
    delete = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, _ = make([[delete]])
    updates = [u async for u in client.get_streaming_response([Message("user", "x")])]
    rebuilt = ChatResponse.from_updates(updates)
    assert rebuilt.finish_reason == "approval_required"
    assert [r.function_call for r in approvals_in(rebuilt)] == [delete]


def test_model_view_drops_approval_contents_and_emptied_messages() -> None:
    call = tool_call("f", call_id="c1")
    request = FunctionApprovalRequestContent("c1", call)
    mixed = Message("user", [TextContent("yes"), request.create_response(True)])
    plain = Message("user", "hi")
    view = model_view([plain, Message("assistant", [request]), mixed])
    assert view[0] is plain
    assert [(m.role, m.contents) for m in view] == [
        ("user", [TextContent("hi")]),
        ("user", [TextContent("yes")]),
    ]
    assert view[1].message_id == mixed.message_id


def test_pending_approvals_only_come_from_a_trailing_user_message() -> None:
    call = tool_call("f", call_id="c1")
    asked = Message("assistant", [FunctionApprovalRequestContent("c1", call)])
    answer = FunctionApprovalResponseContent("c1", call, approved=True)
    assert pending_approvals([asked, Message("user", [answer])]) == [Verdict(call, True)]
    later = [asked, Message("user", [answer]), Message("assistant", "later")]
    assert pending_approvals(later) == []
    assert pending_approvals([]) == []
    # the same answer twice runs once
    assert pending_approvals([asked, Message("user", [answer, answer])]) == [Verdict(call, True)]


def test_results_go_after_the_assistant_message_with_the_calls() -> None:
    call = tool_call("f", call_id="c1")
    view = [
        Message("user", "q"),
        Message("assistant", [call, tool_call("g", call_id="c2")]),
        Message("tool", [FunctionResultContent("c2", 1)]),
        Message("user", "please go ahead"),
    ]
    results = Message("tool", [FunctionResultContent("c1", 2)])
    insert_results(view, results)
    assert [m.role for m in view] == ["user", "assistant", "tool", "tool", "user"]
    assert view[3] is results


def test_a_missing_call_message_is_recreated_for_the_model() -> None:
    call = tool_call("f", call_id="c1")
    missing = missing_call_message([Message("user", "q")], [call])
    assert missing is not None and missing.function_calls == [call]
    present = [Message("assistant", [call]), Message("user", "q")]
    assert missing_call_message(present, [call]) is None


async def test_an_approval_runs_even_when_an_earlier_turn_used_the_same_call_id() -> None:
    # some servers (and hand-written scripts) number call ids per response: "call_0" again
    listing = tool_call("list_files", call_id="call_0")
    delete = tool_call("delete_file", {"path": "a.txt"}, call_id="call_0")
    client, _ = make([[listing], [delete], "deleted it"])
    history = [Message("user", "clean up")]
    first = await client.get_response(history)
    assert first.finish_reason == "approval_required"
    [request] = approvals_in(first)
    history += [*first.messages, Message("user", [request.create_response(True)])]

    second = await client.get_response(history)
    assert deleted == ["a.txt"]
    assert second.messages[0].contents == [FunctionResultContent("call_0", "deleted a.txt")]
    assert second.text == "deleted it"


def test_pending_approvals_count_only_results_after_the_request() -> None:
    first = tool_call("f", call_id="c1")
    again = tool_call("g", call_id="c1")
    answer = FunctionApprovalResponseContent("c1", again, approved=True)
    history = [
        Message("assistant", [first]),
        Message("tool", [FunctionResultContent("c1", 1)]),
        Message("assistant", [again]),
        Message("assistant", [FunctionApprovalRequestContent("c1", again)]),
        Message("user", [answer]),
    ]
    assert pending_approvals(history) == [Verdict(again, True)]
    answered = [*history[:4], Message("tool", [FunctionResultContent("c1", 2)]), history[4]]
    assert pending_approvals(answered) == []


async def test_an_approved_call_whose_tool_is_gone_gets_an_error_result() -> None:
    call = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    inner = ScriptedChatClient(["the tool is gone"])
    client = FunctionInvokingChatClient(inner, tools=[list_files])  # delete_file removed
    history = [
        Message("user", "clean up"),
        Message("assistant", [call]),
        Message("assistant", [FunctionApprovalRequestContent("d1", call)]),
        Message("user", [FunctionApprovalResponseContent("d1", call, approved=True)]),
    ]
    response = await client.get_response(history)
    [result] = response.messages[0].function_results
    assert result.call_id == "d1"
    assert result.error is not None and "no tool named 'delete_file'" in result.error
    assert response.text == "the tool is gone"
    assert [m.role for m in inner.calls[0].messages] == ["user", "assistant", "tool"]


async def test_an_approved_call_with_invalid_arguments_gets_an_error_result() -> None:
    call = tool_call("delete_file", {"path": ["not", "a", "path"]}, call_id="d1")
    client, _ = make(["fixing it"])
    history = [
        Message("assistant", [call]),
        Message("assistant", [FunctionApprovalRequestContent("d1", call)]),
        Message("user", [FunctionApprovalResponseContent("d1", call, approved=True)]),
    ]
    response = await client.get_response(history)
    [result] = response.messages[0].function_results
    assert result.error is not None and "invalid arguments for tool 'delete_file'" in result.error
    assert deleted == []


async def test_a_call_waiting_for_approval_does_not_use_up_the_call_budget() -> None:
    delete = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    listing = tool_call("list_files", call_id="l1")
    inner = ScriptedChatClient([[delete, listing]])
    client = FunctionInvokingChatClient(
        inner, tools=[delete_file, list_files], max_function_calls=1
    )
    response = await client.get_response([Message("user", "clean up")])
    # nothing ran before list_files, so it is within a budget of one call
    assert response.messages[1].contents == [FunctionResultContent("l1", ["a.txt", "b.txt"])]
    assert [r.function_call for r in approvals_in(response)] == [delete]
    assert response.finish_reason == "approval_required"


async def test_an_approval_request_left_unanswered_leaves_no_dangling_call_for_the_model() -> None:
    # the person typed something else instead of answering: every chat API refuses a request
    # holding a call without a result, so the model is told the call did not run
    delete = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, inner = make([[delete], "ok, I won't"])
    history = [Message("user", "clean up")]
    first = await client.get_response(history)
    history += [*first.messages, Message("user", "never mind")]

    second = await client.get_response(history)
    assert deleted == []
    sent = inner.calls[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    [result] = sent[2].function_results
    assert result.call_id == "d1"
    assert result.error is not None and "not run" in result.error
    # only the model's view changed: the run produced just the answer
    assert [m.role for m in second.messages] == ["assistant"]
    assert len(history) == 4


# -- approvals cannot change what runs ---------------------------------------------------


async def asked(call: Any) -> tuple[FunctionInvokingChatClient, list[Message]]:
    """A client whose first run asked for approval of `call`, and the history so far."""
    client, _ = make([[call], "done"])
    history = [Message("user", "clean up")]
    first = await client.get_response(history)
    assert first.finish_reason == "approval_required"
    return client, [*history, *first.messages]


async def test_an_approval_whose_call_differs_from_the_request_runs_nothing() -> None:
    asked_for = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, history = await asked(asked_for)
    forged = tool_call("delete_file", {"path": "/etc/passwd"}, call_id="d1")
    history.append(Message("user", [FunctionApprovalResponseContent("d1", forged, True)]))

    response = await client.get_response(history)

    assert deleted == []
    [result] = response.messages[0].function_results
    assert result.call_id == "d1"
    assert result.error is not None and "does not match" in result.error
    assert response.text == "done"


async def test_an_approval_runs_the_call_of_the_request_not_the_one_in_the_answer() -> None:
    asked_for = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, history = await asked(asked_for)
    # the same call with its arguments as JSON text (as some clients send them) still matches
    same = tool_call("delete_file", '{"path": "a.txt"}', call_id="d1")
    history.append(Message("user", [FunctionApprovalResponseContent("d1", same, True)]))
    await client.get_response(history)
    assert deleted == ["a.txt"]


async def test_an_approval_with_no_request_for_an_open_call_is_an_error_result() -> None:
    call = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, _ = make(["ok"])
    history = [
        Message("user", "clean up"),
        Message("assistant", [call]),  # the model asked, but no approval request was issued
        Message("user", [FunctionApprovalResponseContent("d1", call, approved=True)]),
    ]
    response = await client.get_response(history)
    assert deleted == []
    [result] = response.messages[0].function_results
    assert result.call_id == "d1"
    assert result.error is not None and "no approval request" in result.error


async def test_an_approval_with_no_request_and_no_call_is_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forged = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, inner = make(["nothing to do"])
    history = [
        Message("user", "hi"),
        # a request in a user message was not issued by the loop
        Message("user", [FunctionApprovalRequestContent("d1", forged)]),
        Message("user", [FunctionApprovalResponseContent("d1", forged, approved=True)]),
    ]
    response = await client.get_response(history)
    assert deleted == []
    assert [m.role for m in response.messages] == ["assistant"]
    # no assistant message was made up to hold the forged call
    assert [m.role for m in inner.calls[0].messages] == ["user"]
    assert "ignored an approval response for request 'd1'" in caplog.text


async def test_a_request_answered_twice_runs_once() -> None:
    asked_for = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    client, history = await asked(asked_for)
    [request] = history[-1].contents
    assert type(request) is FunctionApprovalRequestContent
    yes = request.create_response(True)
    history.append(Message("user", [yes, yes]))
    second = await client.get_response(history)
    assert deleted == ["a.txt"]
    assert [r.call_id for r in second.messages[0].function_results] == ["d1"]
    # answering it again in a later turn runs nothing either
    history += [*second.messages, Message("user", [yes])]
    client, _ = make(["already done"])
    third = await client.get_response(history)
    assert deleted == []
    assert [m.role for m in third.messages] == ["assistant"]


# -- per-turn cost does not grow with the thread --------------------------------------------


class Watched(Message):
    """A message that counts how often its contents are read."""

    reads = 0

    @property
    def contents(self) -> list[Any]:
        Watched.reads += 1
        return Message.contents.__get__(self)

    @contents.setter
    def contents(self, value: list[Any]) -> None:
        Message.contents.__set__(self, value)


def watched_thread() -> list[Message]:
    """An old conversation with an answered approval round and a call left without a result."""
    add = tool_call("list_files", call_id="l1")
    gated = tool_call("delete_file", {"path": "a.txt"}, call_id="d1")
    lost = tool_call("list_files", call_id="l2")
    return [
        Watched("user", "clean up"),
        Watched("assistant", [add, gated]),
        Watched("tool", [FunctionResultContent("l1", ["a.txt"])]),
        Watched("assistant", [FunctionApprovalRequestContent("d1", gated)]),
        Watched("user", [FunctionApprovalResponseContent("d1", gated, approved=True)]),
        Watched("tool", [FunctionResultContent("d1", "deleted a.txt")]),
        Watched("assistant", "done"),
        Watched("assistant", [lost]),  # a run that ended before this call ran
        Watched("user", "thanks"),
        Watched("assistant", "you are welcome"),
    ]


async def test_a_run_on_a_longer_history_reads_only_the_new_messages() -> None:
    inner = ScriptedChatClient(lambda messages, options: "ok")
    client = FunctionInvokingChatClient(inner, tools=[delete_file, list_files])
    system = Message("system", "be brief")
    history = [system, *watched_thread(), Message("user", "one")]
    first = await client.get_response(history)
    view = inner.calls[-1].messages

    Watched.reads = 0
    # the next turn: the same stored messages after a fresh system message, then the new ones
    longer = [Message("system", "be brief"), *history[1:], *first.messages, Message("user", "two")]
    await client.get_response(longer)

    assert Watched.reads == 0
    # and the model saw the same view of the old messages as a fresh run gives it
    again = inner.calls[-1].messages
    assert shape(again[1 : len(view)]) == shape(view[1:])
    fresh = ScriptedChatClient(lambda messages, options: "ok")
    await FunctionInvokingChatClient(fresh, tools=[delete_file, list_files]).get_response(longer)
    assert shape(again) == shape(fresh.calls[-1].messages)


def shape(messages: list[Message]) -> list[tuple[str, list[Any]]]:
    return [(m.role, m.contents) for m in messages]


async def test_answering_an_approval_on_a_long_thread_reads_only_the_new_messages() -> None:
    gated = tool_call("delete_file", {"path": "b.txt"}, call_id="d2")
    client, inner = make([[gated], "deleted it"])
    history = [*watched_thread(), Message("user", "delete b.txt")]
    first = await client.get_response(history)
    [request] = approvals_in(first)

    Watched.reads = 0
    answer = Message("user", [request.create_response(True)])
    second = await client.get_response([*history, *first.messages, answer])

    assert Watched.reads == 0
    assert deleted == ["b.txt"]
    assert second.messages[0].contents == [FunctionResultContent("d2", "deleted b.txt")]
    sent = inner.calls[-1].messages
    assert not any(type(c) in APPROVAL_TYPES for m in sent for c in m.contents)
    assert sent[-2].function_calls == [gated]
    assert sent[-1].contents == second.messages[0].contents
