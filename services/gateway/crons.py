"""Interlock's own crons API: scheduled executions of a workspace, the same crons as LangGraph's
``client.crons.*`` (services/gateway/cron_book.py makes, changes and deletes both), fired by the
orchestrators (services/orchestrator/crons.py).

``POST .../crons`` makes one: every tick an execution of ``agent`` of its own, or with a
``session_id`` the session's next turn (queued behind a turn running or waiting for a review,
skipped with ``busy_session_policy="reject"``, or replacing it with ``interrupt`` /
``rollback``). ``GET .../crons`` lists the workspace's,
``GET``, ``PATCH`` and ``DELETE .../crons/{cron_id}`` read, change and delete one, and ``GET
.../crons/{cron_id}/ticks`` says what it fired: each tick, the execution it started. A tick's
execution is kept as any invoke's is. Making, changing and deleting need the role invoke
needs; reading any role.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response, status
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from services.gateway.auth import ANY_ROLE, WRITERS, access
from services.gateway.bodies import api_router
from services.gateway.cron_book import CronAsked, book_of
from services.gateway.langgraph.service import LangGraphService
from services.gateway.openapi import API, BODY_RESPONSES, ProjectPath, WorkspaceQuery
from services.gateway.problems import Problem
from shared.domain.crons import CatchUp, InvalidSchedule
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.crons import CronRecord, Tenant

CRONS = f"{API}/crons"
Policy = Literal["enqueue", "reject", "interrupt", "rollback"]


class CronRequest(BaseModel):
    """A cron to make: what each tick runs, and when."""

    model_config = ConfigDict(extra="forbid")

    agent: Identifier
    schedule: str = Field(
        min_length=1,
        max_length=200,
        description="A cron expression: five fields, or six with seconds last ('* * * * * */5').",
    )
    message: str | None = Field(
        default=None, min_length=1, max_length=100_000, description="Each tick's user message."
    )
    input: dict[str, Any] | None = Field(
        default=None, description="Or each tick's input state, as LangGraph takes it."
    )
    session_id: Identifier | None = Field(
        default=None, description="The session every tick continues; none: a new one each."
    )
    busy_session_policy: Policy = Field(
        default="enqueue",
        description=(
            "A tick finding its session busy: queued after that turn, skipped, or replacing it"
            " (interrupt: on the state it stopped at; rollback: as if it never ran; owners only)."
        ),
    )
    timezone: str | None = Field(default=None, max_length=100, description="IANA; UTC if none.")
    end_time: AwareDatetime | None = None
    enabled: bool = True
    catch_up: CatchUp = Field(
        default="run_once",
        description="Ticks missed while no orchestrator ran: one run for them all, or none.",
    )
    webhook: str | None = Field(
        default=None, max_length=4096, description="Called when each tick's run ends or stops."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_input(self) -> CronRequest:
        if (self.message is None) == (self.input is None):
            raise ValueError("give exactly one of message and input")
        return self

    def state(self) -> dict[str, Any]:
        if self.input is not None:
            return self.input
        return {"messages": [{"role": "user", "content": self.message}]}


class CronChange(BaseModel):
    """What to change of a cron: what the body names, the rest stays."""

    model_config = ConfigDict(extra="forbid")

    schedule: str | None = Field(default=None, min_length=1, max_length=200)
    timezone: str | None = Field(default=None, max_length=100)
    end_time: AwareDatetime | None = None
    enabled: bool | None = None
    catch_up: CatchUp | None = None
    webhook: str | None = Field(default=None, max_length=4096)
    metadata: dict[str, Any] | None = None


class CronView(BaseModel):
    cron_id: str
    agent: str
    session_id: str | None
    schedule: str
    timezone: str | None
    end_time: datetime | None
    enabled: bool
    catch_up: CatchUp
    busy_session_policy: str
    next_run_date: datetime
    input: Any
    webhook: str | None
    metadata: dict[str, Any]
    requested_by: str
    """Who made it: each tick's execution is requested in that name."""
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, cron: CronRecord) -> CronView:
        return cls(
            cron_id=cron.cron_id,
            agent=cron.assistant_id,
            session_id=cron.thread_id,
            schedule=cron.schedule,
            timezone=cron.timezone,
            end_time=cron.end_time,
            enabled=cron.enabled,
            catch_up=cron.catch_up,
            busy_session_policy=cron.multitask_strategy,
            next_run_date=cron.next_run_date,
            input=cron.payload.get("input"),
            webhook=cron.payload.get("webhook"),
            metadata=cron.metadata,
            requested_by=cron.requested_by,
            created_at=cron.created_at,
            updated_at=cron.updated_at,
        )


class CronList(BaseModel):
    items: list[CronView]


class TickView(BaseModel):
    tick: datetime
    execution_id: str | None
    """The execution the tick started; none for a tick that started nothing (skipped as its
    session was busy, its agent gone) or has not yet."""
    session_id: str
    started: bool
    """False for a moment after the tick is claimed, or a while after the claimer died (the
    next sweep starts it)."""


class TickList(BaseModel):
    items: list[TickView]


def schedule_refused(exc: InvalidSchedule) -> Problem:
    return Problem(400, "invalid-schedule", "Invalid schedule", str(exc))


def crons_router(service: LangGraphService, keys: ApiKeys) -> APIRouter:
    router = api_router()
    reader = Depends(access(keys, "reading", ANY_ROLE))
    writer = Depends(access(keys, "scheduling", WRITERS))
    book = book_of(service)
    crons = service.store.crons

    @router.post(
        CRONS,
        status_code=status.HTTP_201_CREATED,
        response_model=CronView,
        tags=["crons"],
        responses=BODY_RESPONSES,
    )
    async def create_cron(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        body: CronRequest,
        key: ApiKey = writer,
    ) -> CronView:
        """Make a cron. Its run is checked now as an invoke is (agent, input, webhook)."""
        tenant = Tenant(project_id, workspace_id)
        session = None
        if body.session_id is not None:
            session = await service.store.threads.get(project_id, workspace_id, body.session_id)
            if session is None or session.deleted:
                raise Problem(
                    404,
                    "session-not-found",
                    "Session not found",
                    f"no session {body.session_id} here",
                )
        asked = CronAsked(
            agent=body.agent,
            schedule=body.schedule,
            input=body.state(),
            webhook=body.webhook,
            timezone=body.timezone,
            end_time=body.end_time,
            enabled=body.enabled,
            metadata=body.metadata,
            on_run_completed="keep",  # an execution is kept, as an invoke's
            catch_up=body.catch_up,
            policy=body.busy_session_policy,
        )
        try:
            return CronView.of(await book.create(tenant, asked, key, session))
        except InvalidSchedule as exc:
            raise schedule_refused(exc) from None

    @router.get(CRONS, response_model=CronList, tags=["crons"])
    async def list_crons(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        agent: Identifier | None = None,
        session_id: Identifier | None = None,
        enabled: bool | None = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
        key: ApiKey = reader,
    ) -> CronList:
        """The workspace's crons, newest first."""
        found = await crons.search(
            Tenant(project_id, workspace_id),
            assistant_id=agent,
            thread_id=session_id,
            enabled=enabled,
            limit=limit,
            offset=offset,
        )
        return CronList(items=[CronView.of(cron) for cron in found])

    @router.get(f"{CRONS}/{{cron_id}}", response_model=CronView, tags=["crons"])
    async def get_cron(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        cron_id: Identifier,
        key: ApiKey = reader,
    ) -> CronView:
        return CronView.of(await book.found(Tenant(project_id, workspace_id), cron_id))

    @router.patch(
        f"{CRONS}/{{cron_id}}", response_model=CronView, tags=["crons"], responses=BODY_RESPONSES
    )
    async def change_cron(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        cron_id: Identifier,
        body: CronChange,
        key: ApiKey = writer,
    ) -> CronView:
        """Change what the body names; a new schedule or time zone moves the next tick to the
        new schedule's first from now."""
        given = body.model_dump(exclude_unset=True)
        if not given:
            raise Problem(400, "invalid-request", "Invalid request", "the body changes nothing")
        try:
            return CronView.of(await book.change(Tenant(project_id, workspace_id), cron_id, given))
        except InvalidSchedule as exc:
            raise schedule_refused(exc) from None

    @router.delete(f"{CRONS}/{{cron_id}}", status_code=204, tags=["crons"])
    async def delete_cron(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        cron_id: Identifier,
        key: ApiKey = writer,
    ) -> Response:
        """Delete the cron: no tick fires after; the executions it started go on."""
        await book.delete(Tenant(project_id, workspace_id), cron_id)
        return Response(status_code=204)

    @router.get(f"{CRONS}/{{cron_id}}/ticks", response_model=TickList, tags=["crons"])
    async def cron_ticks(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        cron_id: Identifier,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        key: ApiKey = reader,
    ) -> TickList:
        """The cron's latest ``limit`` ticks fired, oldest first, each with the execution it
        started; still listed once the cron is deleted (what it fired stays on record)."""
        tenant = Tenant(project_id, workspace_id)
        claims = await crons.claims_of(tenant, cron_id, newest=limit)
        if not claims:
            await book.found(tenant, cron_id)  # a 404 for a cron that never was
        return TickList(
            items=[
                TickView(
                    tick=claim.tick,
                    execution_id=claim.execution_id,
                    session_id=claim.thread_id,
                    started=claim.started,
                )
                for claim in claims
            ]
        )

    return router
