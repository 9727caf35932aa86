"""Found by the chaos suite (poison messages): ``create`` must stay insert-if-absent however many
versions an execution has had, on every store (the MongoDB one cuts old versions down to stubs
when an execution ends)."""

from __future__ import annotations

from shared.domain.execution import ExecutionStatus
from shared.store.ports import Store
from tests import factories as f


async def test_create_is_insert_if_absent_after_old_versions_were_pruned(store: Store) -> None:
    execution, _ = await store.executions.create(f.pending("exec-many"))
    for step in range(6):
        moved = execution.model_copy(update={"epoch": step + 1})
        assert await store.executions.replace(execution, moved) is not None
        stored = await store.executions.get("proj-1", "exec-many")
        assert stored is not None
        execution = stored
    ended = await store.executions.replace(
        execution, execution.model_copy(update={"status": ExecutionStatus.ERROR})
    )
    assert ended is not None
    # A repeated request for the id (a redelivery, an invoke retried with its key, another
    # project's event naming it) finds the execution; it never starts a second one.
    foreign = f.pending("exec-many").model_copy(update={"project_id": "proj-other"})
    again, created = await store.executions.create(foreign)
    assert not created and again == ended
    assert await store.executions.get("proj-other", "exec-many") is None
    latest = await store.executions.get("proj-1", "exec-many")
    assert latest == ended and latest.epoch == 6 and latest.status is ExecutionStatus.ERROR
