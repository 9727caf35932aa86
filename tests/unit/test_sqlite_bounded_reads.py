"""On SQLite the notifier's poll and an approval list are ranges of an index, so they read the
pending deliveries and the one generation's approvals only, however long the history (the
MongoDB adapter gets there with an outbox collection and numbered slots read by ``_id``, for
FerretDB, which uses no index but ``_id``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.store.sqlite import SqliteStore, approvals, notifications


@pytest.mark.parametrize(
    ("query", "params", "index"),
    [
        (
            notifications.DUE,
            ("pending", "2026-12-01T12:00:00.000000+00:00", 20),
            "notification_deliveries_by_due (status=? AND next_key<?)",
        ),
        (approvals.LIST, ("exec-1", 1), "(execution_id=? AND generation=?)"),
    ],
    ids=["notification-poll", "approval-list"],
)
async def test_the_query_is_a_range_of_an_index(
    tmp_path: Path, query: str, params: tuple[object, ...], index: str
) -> None:
    store = await SqliteStore.open(tmp_path / "interlock.db")
    try:
        plan = await store._db.fetch_all(f"EXPLAIN QUERY PLAN {query}", params)
    finally:
        await store.close()
    steps = [row["detail"] for row in plan]
    assert steps[0].startswith("SEARCH ") and index in steps[0], steps
    assert not any(step.startswith("SCAN ") for step in steps), steps
