"""Crons (shared/store/crons.py) on memory, SQLite and MongoDB (FerretDB): a cron reads back as
created, its id taken once; ``set_fields`` writes exactly the fields it names, and refuses the
tenant's, the id's and the creator's; no tenant reads, lists, changes or deletes another's cron;
a search filters, sorts and pages alike everywhere; the sweep sees the enabled crons due across
tenants, soonest first; a tick is claimed once, and a claim stays unstarted until marked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.store.crons import CronRecord, Tenant, TickClaim
from shared.store.ports import Store

T0 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
MINE = Tenant("p-1", "w-1")
THEIRS = Tenant("p-1", "w-2")


def cron(cron_id: str, *, tenant: Tenant = MINE, **fields: Any) -> CronRecord:
    given: dict[str, Any] = {
        "assistant_id": "chat",
        "schedule": "*/5 * * * *",
        "requested_by": "key-1",
        "next_run_date": T0 + timedelta(minutes=5),
        "created_at": T0,
        "updated_at": T0,
        **fields,
    }
    return CronRecord(
        cron_id=cron_id, project_id=tenant.project_id, workspace_id=tenant.workspace_id, **given
    )


def claim(cron_id: str, tick: datetime, *, by: str = "o-1", at: datetime = T0) -> TickClaim:
    return TickClaim(
        claim_id=f"{cron_id}@{tick.isoformat()}",
        cron_id=cron_id,
        project_id=MINE.project_id,
        workspace_id=MINE.workspace_id,
        tick=tick,
        execution_id=f"x-{cron_id}-{tick.minute}",
        thread_id=f"t-{cron_id}-{tick.minute}",
        claimed_by=by,
        claimed_at=at,
    )


async def test_a_cron_reads_back_as_created_and_its_id_is_taken_once(store: Store) -> None:
    first = cron(
        "c-1",
        payload={"input": {"messages": [{"role": "user", "content": "hi"}]}, "a.b": {"$c": 1}},
        metadata={"owner": "ops", "x.y": 2},
        end_time=T0 + timedelta(days=1),
        timezone="Europe/Paris",
        on_run_completed="keep",
        catch_up="skip",
        requester_identity="alice",
    )
    assert await store.crons.create(first)
    assert await store.crons.get(MINE, "c-1") == first
    assert first.created_at == T0.replace(microsecond=123000)  # a BSON date's precision
    assert not await store.crons.create(cron("c-1", schedule="0 * * * *"))
    assert await store.crons.get(MINE, "c-1") == first
    assert await store.crons.get(MINE, "c-2") is None


async def test_set_fields_writes_what_it_names_and_nothing_else(store: Store) -> None:
    await store.crons.create(cron("c-1", metadata={"k": 1}))
    later = T0 + timedelta(minutes=10, microseconds=999)
    # The sweep and a client, each writing its own fields: neither undoes the other.
    assert await store.crons.set_fields(MINE, "c-1", {"next_run_date": later})
    assert await store.crons.set_fields(MINE, "c-1", {"schedule": "0 * * * *", "enabled": False})
    stored = await store.crons.get(MINE, "c-1")
    assert stored is not None
    assert (stored.next_run_date, stored.schedule, stored.enabled, stored.metadata) == (
        later.replace(microsecond=124000),  # to the millisecond
        "0 * * * *",
        False,
        {"k": 1},
    )
    assert await store.crons.set_fields(MINE, "c-1", {"payload": {"$in": [1]}, "end_time": None})
    stored = await store.crons.get(MINE, "c-1")
    assert stored is not None and (stored.payload, stored.end_time) == ({"$in": [1]}, None)
    assert not await store.crons.set_fields(MINE, "c-2", {"enabled": False})
    for refused in ("project_id", "cron_id", "thread_id", "requested_by", "created_at"):
        with pytest.raises(ValueError, match=refused):
            await store.crons.set_fields(MINE, "c-1", {refused: "x"})


async def test_no_tenant_reads_changes_or_deletes_anothers_cron(store: Store) -> None:
    await store.crons.create(cron("c-1"))
    assert await store.crons.get(THEIRS, "c-1") is None
    assert await store.crons.search(THEIRS) == []
    assert await store.crons.count(THEIRS) == 0
    assert not await store.crons.set_fields(THEIRS, "c-1", {"enabled": False})
    assert not await store.crons.delete(THEIRS, "c-1")
    mine = await store.crons.get(MINE, "c-1")
    assert mine is not None and mine.enabled
    assert await store.crons.delete(MINE, "c-1")
    assert await store.crons.get(MINE, "c-1") is None
    assert not await store.crons.delete(MINE, "c-1")


async def test_a_search_filters_sorts_and_pages_alike_everywhere(store: Store) -> None:
    made = [
        cron("c-a", assistant_id="chat", created_at=T0 + timedelta(seconds=3)),
        cron("c-b", assistant_id="mail", created_at=T0 + timedelta(seconds=1), enabled=False),
        cron("c-c", assistant_id="chat", created_at=T0 + timedelta(seconds=2), thread_id="t-1"),
        cron("c-d", assistant_id="chat", created_at=T0 + timedelta(seconds=2)),
        cron("c-e", tenant=THEIRS, assistant_id="chat"),
    ]
    for one in made:
        await store.crons.create(one)

    async def ids(**query: Any) -> list[str]:
        return [c.cron_id for c in await store.crons.search(MINE, **query)]

    assert await ids() == ["c-a", "c-d", "c-c", "c-b"]  # newest first, then by id
    assert await ids(descending=False) == ["c-b", "c-c", "c-d", "c-a"]
    assert await ids(assistant_id="chat") == ["c-a", "c-d", "c-c"]
    assert await ids(thread_id="t-1") == ["c-c"]
    assert await ids(enabled=False) == ["c-b"]
    assert await ids(sort_by="cron_id", descending=False, limit=2, offset=1) == ["c-b", "c-c"]
    assert await ids(sort_by="assistant_id", descending=False) == ["c-a", "c-c", "c-d", "c-b"]
    assert await ids(sort_by="thread_id", descending=True) == ["c-c", "c-d", "c-b", "c-a"]
    assert await store.crons.count(MINE) == 4
    assert await store.crons.count(MINE, assistant_id="chat") == 3
    assert await store.crons.count(MINE, thread_id="t-1") == 1


async def test_the_sweep_sees_every_tenants_enabled_crons_due_soonest_first(store: Store) -> None:
    await store.crons.create(cron("c-late", next_run_date=T0 + timedelta(minutes=2)))
    await store.crons.create(cron("c-soon", tenant=THEIRS, next_run_date=T0))
    await store.crons.create(cron("c-off", next_run_date=T0, enabled=False))
    await store.crons.create(cron("c-future", next_run_date=T0 + timedelta(hours=1)))
    due = await store.crons.due(T0 + timedelta(minutes=2))
    assert [c.cron_id for c in due] == ["c-soon", "c-late"]
    assert [c.cron_id for c in await store.crons.due(T0 + timedelta(minutes=2), limit=1)] == [
        "c-soon"
    ]
    await store.crons.set_fields(THEIRS, "c-soon", {"next_run_date": T0 + timedelta(hours=2)})
    assert [c.cron_id for c in await store.crons.due(T0 + timedelta(minutes=2))] == ["c-late"]


async def test_a_tick_is_claimed_once_however_many_claim_it_at_once(store: Store) -> None:
    tick = T0.replace(microsecond=0) + timedelta(minutes=5)
    outcomes = await asyncio.gather(
        *(store.crons.claim_tick(claim("c-1", tick, by=f"o-{n}")) for n in range(8))
    )
    assert sorted(outcomes) == [False] * 7 + [True]
    claims = await store.crons.claims_of(MINE, "c-1")
    assert len(claims) == 1 and claims[0].tick == tick and not claims[0].started
    assert await store.crons.claims_of(THEIRS, "c-1") == []


async def test_a_claim_stays_unstarted_until_marked(store: Store) -> None:
    at = T0.replace(microsecond=0)
    first, second = at + timedelta(minutes=5), at + timedelta(minutes=10)
    await store.crons.claim_tick(claim("c-1", second, at=at + timedelta(seconds=5)))
    await store.crons.claim_tick(claim("c-1", first, at=at))
    waiting = await store.crons.unstarted(at + timedelta(seconds=6))
    assert [c.tick for c in waiting] == [first, second]  # the oldest claim first
    # Claimed strictly before: a claim made at the cut-off is not yet left behind.
    assert [c.tick for c in await store.crons.unstarted(at + timedelta(seconds=5))] == [first]
    await store.crons.mark_started(waiting[0].claim_id)
    assert [c.tick for c in await store.crons.unstarted(at + timedelta(seconds=6))] == [second]
    assert [c.started for c in await store.crons.claims_of(MINE, "c-1")] == [True, False]
    await store.crons.mark_started("no-such-claim")  # no error
    # A thread tick's turn is known once it starts: said with its mark.
    await store.crons.mark_started(waiting[1].claim_id, "x-turn-7")
    marked = await store.crons.claims_of(MINE, "c-1")
    assert [(c.started, c.execution_id) for c in marked] == [
        (True, waiting[0].execution_id),
        (True, "x-turn-7"),
    ]
    assert [c.tick for c in await store.crons.claims_of(MINE, "c-1", newest=1)] == [second]
    assert len(await store.crons.claims_of(MINE, "c-1", newest=5)) == 2


async def test_old_started_claims_are_forgotten_and_no_other(store: Store) -> None:
    at = T0.replace(microsecond=0)
    ticks = [at + timedelta(minutes=n) for n in range(4)]
    for n, tick in enumerate(ticks):
        await store.crons.claim_tick(claim("c-1", tick, at=at + timedelta(seconds=n)))
    claims = await store.crons.claims_of(MINE, "c-1")
    for old in claims[:3]:
        await store.crons.mark_started(old.claim_id)
    # Claims 0, 1 and 2 are started, 3 is not; all but 3 were made before the cut-off.
    assert await store.crons.forget_claims(at + timedelta(seconds=3), limit=2) == 2
    assert [c.tick for c in await store.crons.claims_of(MINE, "c-1")] == ticks[2:]
    assert await store.crons.forget_claims(at + timedelta(seconds=2), limit=10) == 0  # 2 is at it
    assert await store.crons.forget_claims(at + timedelta(hours=1), limit=10) == 1
    left = await store.crons.claims_of(MINE, "c-1")
    assert [(c.tick, c.started) for c in left] == [(ticks[3], False)]  # never an unstarted one
