"""The step store contract: the in-memory, SQLite and MongoDB (FerretDB here) stores agree."""

from __future__ import annotations

import asyncio
import json

from shared.store.ports import StepRecord, Store


def record(
    key: str, execution_id: str = "exec-s", result: str = '"ok"', **extra: int
) -> StepRecord:
    return StepRecord(
        key=key,
        execution_id=execution_id,
        name="send_email",
        result=result,
        epoch=extra.get("epoch", 1),
        attempt=extra.get("attempt", 1),
    )


async def test_put_then_load_round_trips(store: Store) -> None:
    first = record("exec-s:send_email:1", epoch=2, attempt=3)
    second = record("exec-s:send_email:2", result='{"id": 7}')
    assert await store.steps.put(first) == first
    assert await store.steps.put(second) == second
    assert await store.steps.load("exec-s") == {first.key: first, second.key: second}


async def test_first_writer_wins_and_is_never_overwritten(store: Store) -> None:
    original = record("exec-w:charge:1", execution_id="exec-w", result='"first"')
    await store.steps.put(original)
    later = record("exec-w:charge:1", execution_id="exec-w", result='"second"', epoch=9)
    assert await store.steps.put(later) == original
    assert await store.steps.load("exec-w") == {original.key: original}


async def test_concurrent_puts_of_one_key_all_get_the_stored_record(store: Store) -> None:
    """Many rounds: a race that is lost only sometimes must still be caught."""
    for round_ in range(20):
        key = f"exec-race:charge:{round_}"
        candidates = [
            record(key, execution_id="exec-race", result=json.dumps(f"writer-{i}"), attempt=i)
            for i in range(8)
        ]
        stored = await asyncio.gather(*(store.steps.put(c) for c in candidates))
        assert len(set(stored)) == 1, f"round {round_}: {stored}"
        assert stored[0] in candidates
        assert (await store.steps.load("exec-race"))[key] == stored[0]


async def test_load_returns_only_that_executions_steps(store: Store) -> None:
    mine = record("exec-m:step:1", execution_id="exec-m")
    theirs = record("exec-mm:step:1", execution_id="exec-mm")
    await store.steps.put(mine)
    await store.steps.put(theirs)
    assert await store.steps.load("exec-m") == {mine.key: mine}
    assert await store.steps.load("exec-mm") == {theirs.key: theirs}


async def test_load_of_an_unknown_execution_is_empty(store: Store) -> None:
    assert await store.steps.load("never-ran") == {}


async def test_results_round_trip_exactly(store: Store) -> None:
    value = {
        "ünï.cødé": "日本語 🚀 \u0000 \\ \" '",
        "$big": 123456789012345678901234567890,
        "neg": -(2**63) - 1,
        "float": 0.1 + 0.2,
        "nested": [None, True, {"a.b": [1e308]}],
    }
    text = json.dumps(value, ensure_ascii=False)
    stored = record("exec-u:step:1", execution_id="exec-u", result=text)
    await store.steps.put(stored)
    loaded = (await store.steps.load("exec-u"))[stored.key]
    assert loaded.result == text
    assert json.loads(loaded.result) == value


async def test_get_reads_one_step_by_its_key(store: Store) -> None:
    stored = await store.steps.put(record("exec-1:send:k1", "exec-1"))
    assert await store.steps.get("exec-1:send:k1") == stored
    assert await store.steps.get("exec-1:send:missing") is None
