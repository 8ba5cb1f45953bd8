"""Teams whose models are functions of the conversation, for the tests of a team's state
between turns in process, through `team.as_agent()`, and served (a `cantata serve`
subprocess loads ``tests/teams/_desk.py:desk`` or ``:trio``).

The desk: triage hands a question about payment over to billing and answers anything else
itself; billing answers every question. So a follow-up that does not mention payment shows
who has the conversation: billing, when the team kept its handoff; triage, when it forgot.
The trio: three agents that say their name, how many user messages they were shown and the
user's last one, in a round robin of two turns a run; each model call reports usage.
"""

from __future__ import annotations

from cantata.agents import ChatAgent
from cantata.core import Message, Usage
from cantata.models import ChatOptions, ScriptedChatClient, ScriptedTurn, tool_call
from cantata.teams import GroupChat, Handoff

CALL_USAGE = Usage(10, 3)
"""What each model call of these teams reports."""


def asked(messages: list[Message]) -> str:
    """The user's last message (the user's own: other agents' replies reach a participant
    as user messages under their authors' names)."""
    for m in reversed(messages):
        if m.role == "user" and m.author_name in (None, "user"):
            return m.text
    return ""


def _triage(messages: list[Message], options: ChatOptions) -> ScriptedTurn:
    question = asked(messages)
    offered = {t.name for t in options.tools or ()}
    if "paid" in question and "transfer_to_billing" in offered:
        return [tool_call("transfer_to_billing", {"summary": "a payment question"})]
    return f"triage: how can I help with {question!r}?"


def _billing(messages: list[Message], options: ChatOptions) -> str:
    return f"billing: about {asked(messages)!r}"


def make_desk() -> Handoff:
    """A new desk (new agents, new scripted models)."""
    triage = ChatAgent(
        ScriptedChatClient(_triage, usage=CALL_USAGE), name="triage", description="routes"
    )
    billing = ChatAgent(
        ScriptedChatClient(_billing, usage=CALL_USAGE), name="billing", description="invoices"
    )
    return Handoff([triage, billing], name="desk")


def _says(name: str) -> ScriptedChatClient:
    def answer(messages: list[Message], options: ChatOptions) -> str:
        users = [m for m in messages if m.role == "user" and m.author_name in (None, "user")]
        return f"{name} saw {len(users)}: {asked(messages)}"

    return ScriptedChatClient(answer, usage=CALL_USAGE)


def make_trio() -> GroupChat:
    """A new round robin of a, b and c, two turns a run."""
    agents = [ChatAgent(_says(n), name=n, description=f"agent {n}") for n in "abc"]
    return GroupChat(agents, name="trio", max_turns=2)


desk = make_desk()
trio = make_trio()
served = {"desk": desk, "trio": trio}
