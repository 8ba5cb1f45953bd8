"""Guardrails and usage accounting: what they add to one agent turn on the scripted model.

One turn is a ``ChatAgent.run`` of a one-line input that the scripted model answers at
once (no tools). Measured: the plain turn, the turn with one blocking input guardrail, with
one parallel input guardrail, and with usage limits (all counters on, none reached); each
overhead is a share of the plain turn (goal: under 5%). The peer is the OpenAI Agents SDK
(``agents``): ``Runner.run`` on a model that answers at once, plain and with one
``@input_guardrail`` (tracing off), so both overheads print side by side, with the ratio of
the guarded turns' times.

Run: ``python benchmarks/bench_guardrails.py`` (or through ``benchmarks/run.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import Row, peer_version
from cantata.agents import ChatAgent, Guardrail, UsageLimits, Verdict
from cantata.core import Usage
from cantata.models import ScriptedChatClient


def _check(text: str) -> Verdict:
    return Verdict.tripwire("no") if "forbidden" in text else Verdict.passed()


async def _check_async(text: str) -> Verdict:
    return _check(text)


def _agent(**options: Any) -> ChatAgent:
    client = ScriptedChatClient(lambda m, o: "ok", usage=Usage(12, 3), max_calls=0)
    return ChatAgent(client, name="bench", **options)


async def _per_turn(turn: Callable[[], Awaitable[Any]], n: int) -> float:
    """The best of five rounds of `n` turns, in microseconds a turn."""
    for _ in range(max(1, n // 10)):
        await turn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            await turn()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


async def _ours(n: int) -> dict[str, float]:
    agents = {
        "plain": _agent(),
        "blocking": _agent(guardrails=[Guardrail(_check, name="blocking")]),
        "parallel": _agent(guardrails=[Guardrail(_check_async, name="p", mode="parallel")]),
        "usage": _agent(usage_limits=UsageLimits(total_tokens=10**12, model_calls=10**9)),
    }
    times = dict.fromkeys(agents, float("inf"))
    for _ in range(3):  # interleaved, so a busy moment of the machine hits every variant
        for name, agent in agents.items():
            took = await _per_turn(lambda a=agent: a.run("hello there"), n)  # type: ignore[misc]
            times[name] = min(times[name], took)
    return times


async def _peer(n: int) -> dict[str, float] | None:
    try:
        from openai.types.responses import ResponseOutputMessage, ResponseOutputText

        import agents as sdk
    except ImportError:
        return None

    class Instant(sdk.Model):  # type: ignore[misc]
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            text = ResponseOutputText(type="output_text", text="ok", annotations=[])
            message = ResponseOutputMessage(
                id="m", type="message", role="assistant", status="completed", content=[text]
            )
            return sdk.ModelResponse(output=[message], usage=sdk.Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @sdk.input_guardrail  # type: ignore[misc]
    async def check(ctx: Any, agent: Any, text: Any) -> Any:
        return sdk.GuardrailFunctionOutput(
            output_info=None, tripwire_triggered="forbidden" in str(text)
        )

    sdk.set_tracing_disabled(True)
    config = sdk.RunConfig(tracing_disabled=True)
    plain = sdk.Agent(name="bench", model=Instant())
    guarded = sdk.Agent(name="bench", model=Instant(), input_guardrails=[check])
    return {
        "plain": await _per_turn(
            lambda: sdk.Runner.run(plain, "hello there", run_config=config), n
        ),
        "blocking": await _per_turn(
            lambda: sdk.Runner.run(guarded, "hello there", run_config=config), n
        ),
    }


async def collect(quick: bool) -> list[Row]:
    n = 300 if quick else 2000
    ours = await _ours(n)
    peer = await _peer(max(100, n // 4))
    version = peer_version("openai-agents")
    rows = []
    for name in ("blocking", "parallel", "usage"):
        overhead = (ours[name] - ours["plain"]) / ours["plain"] * 100
        peer_overhead = None
        if peer is not None and name == "blocking":
            peer_overhead = (peer["blocking"] - peer["plain"]) / peer["plain"] * 100
        rows.append(
            Row(
                name=f"{name} {'input guardrail' if name != 'usage' else 'accounting'}: "
                "overhead on one agent turn",
                unit="% of the turn",
                ours=overhead,
                peer=peer_overhead,
                peer_name="openai-agents" if peer_overhead is not None else None,
                peer_version=version if peer_overhead is not None else None,
                higher_is_better=False,
                goal="< 5",
                extra={"plain_us": ours["plain"], "guarded_us": ours[name]},
            )
        )
    if peer is not None:
        rows.append(
            Row(
                name="one agent turn with a blocking input guardrail",
                unit="us",
                ours=ours["blocking"],
                peer=peer["blocking"],
                peer_name="openai-agents",
                peer_version=version,
                higher_is_better=False,
                extra={"plain_us": ours["plain"], "peer_plain_us": peer["plain"]},
            )
        )
    return rows


async def _main() -> None:
    for row in await collect(quick=False):
        peer = "" if row.peer is None else f"  openai-agents {row.peer_version}: {row.peer:.2f}"
        ratio = "" if row.ratio is None else f"  ratio {row.ratio:.2f}x"
        print(f"{row.name}: {row.ours:.2f} {row.unit}{peer}{ratio}  {row.extra}")


if __name__ == "__main__":
    asyncio.run(_main())
