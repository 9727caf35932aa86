"""A workspace's crons as both APIs make, change and delete them: LangGraph's (services/gateway/
langgraph/cron_routes.py) and Interlock's own (services/gateway/crons.py). Free of HTTP, so
the two cannot drift; the orchestrators fire the crons (services/orchestrator/crons.py).

A cron's run is checked when the cron is made or its run changed, as a run is (its agent, its
input, its webhook): a mistake is an answer now, not a failure at its first tick. It runs in
the name of the key that made it. A cron on a thread makes each tick the thread's next turn, of
the thread's agent, placed by its busy-thread policy; a policy that cancels the thread's turn
(``interrupt``, ``rollback``) needs an owner, as a run with it does.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.gateway.auth import OWNERS, require_role
from services.gateway.langgraph.requests import agent_input
from services.gateway.langgraph.service import LangGraphService, assistant_mismatch
from services.gateway.problems import Problem
from shared.domain.crons import CatchUp, checked_schedule, next_tick
from shared.domain.execution import Execution
from shared.events import BusyThreadPolicy
from shared.store.api_keys import ApiKey
from shared.store.crons import CronRecord, CronStore, Tenant
from shared.store.threads import ThreadRecord

RunCheck = Callable[[str, Any, str | None], Awaitable[None]]
"""Raises the problem a run of (agent, input, webhook) would meet now."""
LatestTurn = Callable[[ThreadRecord], Awaitable[Execution | None]]
CHANGEABLE = frozenset(
    {"schedule", "timezone", "end_time", "enabled", "on_run_completed", "catch_up", "metadata",
     "input", "webhook"}
)  # fmt: skip
"""What a change may name."""


def cron_not_found(cron_id: str) -> Problem:
    return Problem(404, "cron-not-found", "Cron not found", f"no cron {cron_id}")


@dataclass(frozen=True)
class CronAsked:
    """A cron as a client asks for one, in either API's words."""

    agent: str
    schedule: str
    input: Any = None
    """The graph's input state each tick's run starts with, as LangGraph takes it."""
    webhook: str | None = None
    timezone: str | None = None
    end_time: datetime | None = None
    enabled: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    on_run_completed: str | None = None
    catch_up: CatchUp = "run_once"
    policy: BusyThreadPolicy = "enqueue"
    policy_given: bool = False
    """Whether the client named the policy (LangGraph keeps it in the cron's payload)."""


class CronBook:
    def __init__(self, crons: CronStore, check_run: RunCheck, latest_turn: LatestTurn) -> None:
        self._crons = crons
        self._check_run = check_run
        self._latest_turn = latest_turn

    async def create(
        self, tenant: Tenant, asked: CronAsked, key: ApiKey, thread: ThreadRecord | None = None
    ) -> CronRecord:
        """Store the cron: every tick on a new thread, or the next turn of ``thread``. Raises
        ``InvalidSchedule`` and the run's problems."""
        schedule = checked_schedule(asked.schedule, asked.timezone)
        await self._check_run(asked.agent, asked.input, asked.webhook)
        if thread is not None:
            await self._check_thread(thread, asked.agent, asked.policy, key)
        now = datetime.now(UTC)
        payload: dict[str, Any] = {
            "input": asked.input,
            "metadata": asked.metadata or None,
            "webhook": asked.webhook,
            "multitask_strategy": asked.policy if asked.policy_given else None,
        }
        cron = CronRecord(
            cron_id=str(uuid.uuid4()),
            project_id=tenant.project_id,
            workspace_id=tenant.workspace_id,
            assistant_id=asked.agent,
            thread_id=None if thread is None else thread.thread_id,
            schedule=schedule,
            timezone=asked.timezone,
            end_time=asked.end_time,
            enabled=asked.enabled,
            payload={name: value for name, value in payload.items() if value is not None},
            metadata=asked.metadata,
            # A thread's ticks are its turns: the thread is the caller's, never deleted.
            on_run_completed=(asked.on_run_completed or "delete") if thread is None else None,
            catch_up=asked.catch_up,
            multitask_strategy=asked.policy,
            requested_by=key.principal,
            requester_identity=key.identity,
            next_run_date=next_tick(schedule, now, asked.timezone),
            created_at=now,
            updated_at=now,
        )
        await self._crons.create(cron)
        return cron

    async def _check_thread(
        self, thread: ThreadRecord, agent: str, policy: str, key: ApiKey
    ) -> None:
        if policy in ("interrupt", "rollback"):
            # Its ticks cancel the thread's turn (a review it waits for ends with it): what
            # a run with this policy, and Interlock's cancel route, need.
            require_role(key, f"a cron with multitask_strategy={policy}", OWNERS)
        latest = await self._latest_turn(thread)
        if latest is not None and latest.agent != agent:
            raise assistant_mismatch(thread.thread_id, latest.agent, agent)

    async def found(self, tenant: Tenant, cron_id: str) -> CronRecord:
        cron = await self._crons.get(tenant, cron_id)
        if cron is None:
            raise cron_not_found(cron_id)
        return cron

    async def change(self, tenant: Tenant, cron_id: str, given: dict[str, Any]) -> CronRecord:
        """Change what ``given`` names (``CHANGEABLE``; None clears what may be cleared); a new
        schedule or time zone moves the next tick to the new schedule's first from now. Raises
        ``InvalidSchedule``, the run's problems, and a 404."""
        unknown = sorted(given.keys() - CHANGEABLE)
        if unknown:
            raise ValueError(f"a cron's {', '.join(unknown)} cannot be changed")
        cron = await self.found(tenant, cron_id)
        now = datetime.now(UTC)
        fields: dict[str, Any] = {"updated_at": now}
        for name in ("end_time", "enabled", "on_run_completed", "catch_up", "metadata"):
            if name in given and (given[name] is not None or name == "end_time"):
                fields[name] = given[name]
        if "schedule" in given or "timezone" in given:
            timezone = given.get("timezone", cron.timezone)
            schedule = checked_schedule(given.get("schedule") or cron.schedule, timezone)
            fields |= {
                "schedule": schedule,
                "timezone": timezone,
                "next_run_date": next_tick(schedule, now, timezone),
            }
        if {"input", "webhook"} & given.keys():
            payload = {**cron.payload}
            for name in ("input", "webhook"):
                if name in given:
                    payload[name] = given[name]
            await self._check_run(cron.assistant_id, payload.get("input"), payload.get("webhook"))
            fields["payload"] = {k: v for k, v in payload.items() if v is not None}
        if not await self._crons.set_fields(tenant, cron_id, fields):
            raise cron_not_found(cron_id)
        return await self.found(tenant, cron_id)

    async def delete(self, tenant: Tenant, cron_id: str) -> None:
        """No tick fires after; the runs it started go on."""
        if not await self._crons.delete(tenant, cron_id):
            raise cron_not_found(cron_id)


def book_of(service: LangGraphService) -> CronBook:
    """The workspace's crons, their runs checked by the gateway's intake as runs are."""

    async def check_run(agent: str, given: Any, webhook: str | None) -> None:
        await service.intake.check_request(agent, agent_input(given or {}))
        if webhook is not None:
            await service.check_webhook(webhook)

    return CronBook(service.store.crons, check_run, service.conversations.latest)
