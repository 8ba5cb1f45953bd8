"""Scripted participants shared by the team tests: real agents on the scripted model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cantata.agents import ChatAgent
from cantata.core import Message
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, ToolSpec, tool_call
from cantata.tools import tool


def counting_agent(name: str, *, approve_after: int | None = None) -> ChatAgent:
    """Answers ``"<name> says <n>"`` where n is how many messages it was shown; with
    `approve_after`, adds APPROVE once it was shown at least that many."""

    def answer(messages: list[Message], options: ChatOptions) -> str:
        text = f"{name} says {len(messages)}"
        if approve_after is not None and len(messages) >= approve_after:
            text += " APPROVE"
        return text

    return ChatAgent(ScriptedChatClient(answer), name=name, description=f"the {name}")


def function_agent(
    name: str, fn: Callable[[Sequence[Message]], str], *, description: str = ""
) -> ChatAgent:
    """A participant whose model answers `fn(messages)`."""
    return ChatAgent(
        ScriptedChatClient(lambda messages, options: fn(messages)),
        name=name,
        description=description or f"the {name}",
    )


def paying_agent(
    name: str, ran: list[int], *, hand_to: str | None = None, amounts: Sequence[int] = (5,)
) -> ChatAgent:
    """A participant whose model calls ``pay`` (a tool that needs a person's approval) once
    per amount on its first turn, then says what became of the calls (the tool's results,
    or the rejections it was shown); with `hand_to`, it hands off to that agent instead
    once the calls are decided, when a handoff team offers it the transfer. `ran` gets each
    amount paid."""

    @tool(name="pay", approval_mode="always_require")
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        last = messages[-1]
        if last.role == "tool":
            said = "; ".join(
                str(r.error if r.error is not None else r.result) for r in last.function_results
            )
            transfer = f"transfer_to_{hand_to}"
            if hand_to is not None and any(s.name == transfer for s in options.tools or ()):
                return [tool_call(transfer, {"summary": f"pay: {said}"})]
            return f"{name} says {said}"
        if any(m.function_results for m in messages):
            return f"{name} has paid already"
        return [tool_call("pay", {"amount": a}) for a in amounts]

    return ChatAgent(ScriptedChatClient(answer), name=name, description=f"the {name}", tools=[pay])


def asking_agent(name: str) -> ChatAgent:
    """A participant whose model calls ``ask_clerk``, a tool declared without a function
    (the caller answers it), then says the answer it got."""
    spec = ToolSpec(
        "ask_clerk",
        "Ask the clerk a question.",
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )

    def answer(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
        last = messages[-1]
        if last.role == "tool":
            outcome = last.function_results[-1]
            said = outcome.error if outcome.error is not None else outcome.result
            return f"{name} got {said}"
        return [tool_call("ask_clerk", {"q": "how much?"})]

    return ChatAgent(
        ScriptedChatClient(answer),
        name=name,
        description=f"the {name}",
        options=ChatOptions(tools=[spec]),
    )
