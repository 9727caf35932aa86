"""The in-memory adapter of shared/store/crons.py: for unit tests and the contract suite."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from shared.store.crons import (
    CronRecord,
    CronSort,
    Tenant,
    TickClaim,
    checked_fields,
    sort_key,
)


class InMemoryCrons:
    def __init__(self) -> None:
        self._crons: dict[str, CronRecord] = {}
        self._claims: dict[str, TickClaim] = {}

    def _of(self, tenant: Tenant, cron_id: str) -> CronRecord | None:
        cron = self._crons.get(cron_id)
        return cron if cron is not None and cron.tenant == tenant else None

    async def create(self, cron: CronRecord) -> bool:
        if cron.cron_id in self._crons:
            return False
        self._crons[cron.cron_id] = cron
        return True

    async def get(self, tenant: Tenant, cron_id: str) -> CronRecord | None:
        return self._of(tenant, cron_id)

    async def set_fields(self, tenant: Tenant, cron_id: str, fields: dict[str, Any]) -> bool:
        checked_fields(fields)
        cron = self._of(tenant, cron_id)
        if cron is None:
            return False
        # Validated again, as a read from the database would be (times to the millisecond).
        self._crons[cron_id] = CronRecord.model_validate({**dict(cron), **fields})
        return True

    async def delete(self, tenant: Tenant, cron_id: str) -> bool:
        if self._of(tenant, cron_id) is None:
            return False
        del self._crons[cron_id]
        return True

    def _matching(
        self, tenant: Tenant, assistant_id: str | None, thread_id: str | None, enabled: bool | None
    ) -> list[CronRecord]:
        return [
            cron
            for cron in self._crons.values()
            if cron.tenant == tenant
            and (assistant_id is None or cron.assistant_id == assistant_id)
            and (thread_id is None or cron.thread_id == thread_id)
            and (enabled is None or cron.enabled == enabled)
        ]

    async def search(
        self,
        tenant: Tenant,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: CronSort = "created_at",
        descending: bool = True,
    ) -> list[CronRecord]:
        found = sorted(
            self._matching(tenant, assistant_id, thread_id, enabled),
            key=lambda cron: sort_key(cron, sort_by),
            reverse=descending,
        )
        return found[offset : offset + limit]

    async def count(
        self, tenant: Tenant, *, assistant_id: str | None = None, thread_id: str | None = None
    ) -> int:
        return len(self._matching(tenant, assistant_id, thread_id, None))

    async def due(self, now: datetime, *, limit: int = 100) -> list[CronRecord]:
        due = [c for c in self._crons.values() if c.enabled and c.next_run_date <= now]
        return sorted(due, key=lambda cron: (cron.next_run_date, cron.cron_id))[:limit]

    async def claim_tick(self, claim: TickClaim) -> bool:
        if claim.claim_id in self._claims:
            return False
        self._claims[claim.claim_id] = claim
        return True

    async def mark_started(self, claim_id: str, execution_id: str | None = None) -> None:
        claim = self._claims.get(claim_id)
        if claim is not None:
            started: dict[str, object] = {"started": True}
            if execution_id is not None:
                started["execution_id"] = execution_id
            self._claims[claim_id] = claim.model_copy(update=started)

    async def forget_claims(self, claimed_before: datetime, *, limit: int = 100) -> int:
        old = sorted(
            (c for c in self._claims.values() if c.started and c.claimed_at < claimed_before),
            key=lambda claim: (claim.claimed_at, claim.claim_id),
        )[:limit]
        for claim in old:
            del self._claims[claim.claim_id]
        return len(old)

    async def unstarted(self, claimed_before: datetime, *, limit: int = 100) -> list[TickClaim]:
        waiting = [
            c for c in self._claims.values() if not c.started and c.claimed_at < claimed_before
        ]
        return sorted(waiting, key=lambda claim: (claim.claimed_at, claim.claim_id))[:limit]

    async def claims_of(
        self, tenant: Tenant, cron_id: str, *, newest: int | None = None
    ) -> Sequence[TickClaim]:
        found = sorted(
            (
                c
                for c in self._claims.values()
                if c.cron_id == cron_id and (c.project_id, c.workspace_id) == tenant
            ),
            key=lambda claim: claim.tick,
        )
        return found if newest is None else found[max(0, len(found) - newest) :]
