"""`WorkflowRun.save_checkpoint`: a run without a store checkpoints when asked, and a
checkpoint (incremental) goes only into the store of the run's last one."""

from __future__ import annotations

import pytest

from cantata.core import ConfigurationError
from cantata.workflows import InMemoryCheckpointStore, WorkflowBuilder, WorkflowContext, executor


@executor
async def remember(value: int, ctx: WorkflowContext[None, int]) -> None:
    ctx.set_state("last", value)
    await ctx.yield_output(value)


async def test_a_run_without_a_store_saves_when_asked_and_restores_from_it() -> None:
    workflow = WorkflowBuilder(remember).build()
    result = await workflow.run(7)
    run = result.run
    assert run.checkpoint_store is None and run.checkpoint_id is None
    snapshots = InMemoryCheckpointStore()
    first = await run.save_checkpoint(snapshots)
    second = await run.save_checkpoint(snapshots)  # nothing changed: a record, no values
    assert first != second
    restored = await workflow.restore(second, checkpoint_store=snapshots)
    assert restored.outputs == [7]
    restored.detach_checkpoint_store()
    assert restored.checkpoint_store is None
    with pytest.raises(ConfigurationError, match="another store"):
        await run.save_checkpoint(InMemoryCheckpointStore())
