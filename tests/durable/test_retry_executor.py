"""An executor's own retry policy: ``@executor(retry_policy=...)`` and
``Executor(id, retry_policy=...)`` retry like `WorkflowBuilder.with_retry`; anything that is
not a policy is refused with a typed error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import ConfigurationError, WorkflowError
from cantata.core.retry import RetryPolicy
from cantata.workflows import Executor, WorkflowBuilder, WorkflowContext, executor, handler

QUICK = RetryPolicy(attempts=3, initial_delay=0)


async def test_a_function_executor_retries_by_its_own_policy() -> None:
    tries: list[int] = []

    @executor(retry_policy=QUICK)
    def fetch(n: int, ctx: WorkflowContext[None, int]) -> None:
        tries.append(n)
        if len(tries) < 3:
            raise TimeoutError("slow")
        ctx.yield_output(n)

    assert fetch.retry_policy is QUICK
    result = await WorkflowBuilder(fetch).build().run(5)
    assert result.outputs == [5] and tries == [5, 5, 5]


class Fetcher(Executor):
    def __init__(self) -> None:
        super().__init__("fetcher", retry_policy=RetryPolicy(attempts=2, initial_delay=0))
        self.tries = 0

    @handler
    async def on(self, n: int, ctx: WorkflowContext[None, int]) -> None:
        self.tries += 1
        raise ConnectionResetError(f"reset {self.tries}")


async def test_a_class_executor_retries_by_its_own_policy_then_fails_typed() -> None:
    fetcher = Fetcher()
    with pytest.raises(WorkflowError, match="reset 2"):
        await WorkflowBuilder(fetcher).build().run(1)
    assert fetcher.tries == 2


async def test_without_a_policy_an_executor_is_not_retried() -> None:
    tries: list[int] = []

    @executor
    def once(n: int) -> None:
        tries.append(n)
        raise TimeoutError("slow")

    with pytest.raises(WorkflowError, match="slow"):
        await WorkflowBuilder(once).build().run(1)
    assert tries == [1] and once.retry_policy is None


@given(st.one_of(st.integers(), st.text(), st.booleans(), st.dictionaries(st.text(), st.none())))
def test_a_retry_policy_that_is_no_policy_is_refused(bad: Any) -> None:
    def step(n: int) -> None:
        return None

    with pytest.raises(ConfigurationError, match="retry_policy"):
        executor(retry_policy=bad)(step)
