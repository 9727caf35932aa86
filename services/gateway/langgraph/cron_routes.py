"""LangGraph's crons API (``client.crons.*``): scheduled runs of the workspace, fired by the
orchestrators (services/orchestrator/crons.py).

The routes and bodies are the Agent Server's: ``POST /runs/crons`` (a cron whose every tick runs
on a new thread), ``POST /threads/{thread_id}/runs/crons`` (a cron whose every tick is the
thread's next turn), ``POST /runs/crons/search`` and ``/count``, ``GET``, ``PATCH`` and
``DELETE /runs/crons/{cron_id}``. A cron on a thread queues its ticks behind a busy thread
(``enqueue``) or skips them (``reject``); a policy that would cancel the thread's turn is
refused with a 400 that says so.
A cron's run is checked as a run is when the cron is made (its agent, its input, its webhook),
and runs in the name of the key that made it; making, changing and deleting one needs a
member's or an owner's role (what starting a run needs), reading one any role. A schedule that
does not read as a cron expression, or a time zone that does not exist, is a 422 as on
LangGraph's server.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from services.gateway.auth import ANY_ROLE, WRITERS, access, require_role
from services.gateway.bodies import api_router, json_object
from services.gateway.cron_book import CronAsked, book_of
from services.gateway.langgraph.requests import unsupported
from services.gateway.langgraph.routes import PREFIX, TAGS
from services.gateway.langgraph.service import LangGraphService, Scope
from services.gateway.openapi import json_body
from services.gateway.problems import Problem
from shared.domain.crons import CatchUp, InvalidSchedule
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.crons import CronRecord, CronSort, Tenant
from shared.store.threads import ThreadRecord

RawBody = Annotated[Any, Body(include_in_schema=False)]
REFUSED_OPTIONS = ("config", "context", "interrupt_before", "interrupt_after")


class CronCreate(BaseModel):
    """The body of ``crons.create`` (every field langgraph-sdk sends)."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: Identifier
    schedule: str = Field(min_length=1, max_length=200)
    input: Any = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    checkpoint_during: bool | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    webhook: str | None = Field(default=None, max_length=4096)
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    end_time: AwareDatetime | None = None
    enabled: bool | None = None
    timezone: str | None = Field(default=None, max_length=100)
    on_run_completed: Literal["delete", "keep"] | None = None
    catch_up: CatchUp | None = None
    """Interlock's: what ticks missed while no orchestrator ran do (``run_once``, LangGraph's
    behaviour and the default, or ``skip``)."""
    stream_mode: Any = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: str | None = None


class CronPatch(BaseModel):
    """The body of ``crons.update``: what it names changes, the rest stays."""

    model_config = ConfigDict(extra="forbid")

    schedule: str | None = Field(default=None, min_length=1, max_length=200)
    timezone: str | None = Field(default=None, max_length=100)
    end_time: AwareDatetime | None = None
    enabled: bool | None = None
    input: Any = None
    metadata: dict[str, Any] | None = None
    webhook: str | None = Field(default=None, max_length=4096)
    on_run_completed: Literal["delete", "keep"] | None = None
    catch_up: CatchUp | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None


class CronSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=100_000)
    sort_by: CronSort | None = None
    sort_order: Literal["asc", "desc"] | None = None
    metadata: dict[str, Any] | None = None
    select: list[str] | None = None


class CronCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] | None = None


def refuse_options(body: BaseModel) -> None:
    named = [name for name in REFUSED_OPTIONS if getattr(body, name, None)]
    if named:
        raise unsupported(
            f"{', '.join(named)}: not supported by Interlock's LangGraph API (a cron's run is"
            " durable and runs its agent as registered; see docs/langgraph-api.md)"
        )


def schedule_problem(exc: InvalidSchedule) -> Problem:
    return Problem(422, "invalid-schedule", "Invalid schedule", str(exc))


def cron_body(cron: CronRecord) -> dict[str, Any]:
    """A cron as LangGraph's API answers it."""
    return {
        "cron_id": cron.cron_id,
        "assistant_id": cron.assistant_id,
        "thread_id": cron.thread_id,
        "on_run_completed": cron.on_run_completed,
        "end_time": cron.end_time.isoformat() if cron.end_time else None,
        "schedule": cron.schedule,
        "timezone": cron.timezone,
        "created_at": cron.created_at.isoformat(),
        "updated_at": cron.updated_at.isoformat(),
        "payload": cron.payload,
        "user_id": cron.requested_by,
        "next_run_date": cron.next_run_date.isoformat(),
        "metadata": cron.metadata,
        "enabled": cron.enabled,
        "catch_up": cron.catch_up,
    }


def build_cron_router(service: LangGraphService, keys: ApiKeys) -> APIRouter:
    router = api_router()
    anyone = Depends(access(keys, "reading", ANY_ROLE))
    crons = service.store.crons

    book = book_of(service)

    async def made(
        tenant: Tenant, raw: Any, key: ApiKey, thread: ThreadRecord | None = None
    ) -> dict[str, Any]:
        """The cron the body asks for, stored: every tick on a new thread, or on ``thread``."""
        require_role(key, "creating a cron", WRITERS)
        asked = json_object(raw, CronCreate, required=True)
        refuse_options(asked)
        wanted = CronAsked(
            agent=asked.assistant_id,
            schedule=asked.schedule,
            input=asked.input,
            webhook=asked.webhook,
            timezone=asked.timezone,
            end_time=asked.end_time,
            enabled=asked.enabled if asked.enabled is not None else True,
            metadata=asked.metadata or {},
            on_run_completed=asked.on_run_completed,
            catch_up=asked.catch_up or "run_once",
            policy=asked.multitask_strategy or "enqueue",
            policy_given=asked.multitask_strategy is not None,
        )
        try:
            cron = await book.create(tenant, wanted, key, thread)
        except InvalidSchedule as exc:
            raise schedule_problem(exc) from None
        return cron_body(cron)

    @router.post(
        f"{PREFIX}/runs/crons", tags=TAGS, openapi_extra=json_body(CronCreate, required=True)
    )
    async def create_cron(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> dict[str, Any]:
        """A cron whose every tick runs ``assistant_id`` on a new thread (``crons.create``)."""
        return await made(Tenant(project_id, workspace_id), raw, key)

    @router.post(
        f"{PREFIX}/threads/{{thread_id}}/runs/crons",
        tags=TAGS,
        openapi_extra=json_body(CronCreate, required=True),
    )
    async def create_thread_cron(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """A cron whose every tick is a new turn of the thread (``crons.create_for_thread``),
        placed by ``multitask_strategy`` when the thread is busy."""
        thread = await service.thread(Scope(project_id, workspace_id), thread_id)
        return await made(Tenant(project_id, workspace_id), raw, key, thread)

    @router.post(
        f"{PREFIX}/runs/crons/search",
        tags=TAGS,
        openapi_extra=json_body(CronSearch, required=False),
    )
    async def search_crons(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> list[dict[str, Any]]:
        asked = json_object(raw, CronSearch, required=False)
        if asked.select or asked.metadata:
            raise unsupported("select, metadata: crons are searched by assistant, thread, enabled")
        found_crons = await crons.search(
            Tenant(project_id, workspace_id),
            assistant_id=asked.assistant_id,
            thread_id=asked.thread_id,
            enabled=asked.enabled,
            limit=asked.limit,
            offset=asked.offset,
            sort_by=asked.sort_by or "created_at",
            descending=(asked.sort_order or "desc") == "desc",
        )
        return [cron_body(cron) for cron in found_crons]

    @router.post(
        f"{PREFIX}/runs/crons/count", tags=TAGS, openapi_extra=json_body(CronCount, required=False)
    )
    async def count_crons(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> int:
        asked = json_object(raw, CronCount, required=False)
        if asked.metadata:
            raise unsupported("metadata: crons are counted by assistant and thread")
        return await crons.count(
            Tenant(project_id, workspace_id),
            assistant_id=asked.assistant_id,
            thread_id=asked.thread_id,
        )

    @router.get(f"{PREFIX}/runs/crons/{{cron_id}}", tags=TAGS)
    async def get_cron(
        project_id: Identifier, workspace_id: Identifier, cron_id: Identifier, key: ApiKey = anyone
    ) -> dict[str, Any]:
        return cron_body(await book.found(Tenant(project_id, workspace_id), cron_id))

    @router.patch(
        f"{PREFIX}/runs/crons/{{cron_id}}",
        tags=TAGS,
        openapi_extra=json_body(CronPatch, required=True),
    )
    async def update_cron(
        project_id: Identifier,
        workspace_id: Identifier,
        cron_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """Change what the body names (``crons.update``); a new schedule or time zone moves the
        next tick to the first one of the new schedule from now."""
        require_role(key, "changing a cron", WRITERS)
        asked = json_object(raw, CronPatch, required=True)
        refuse_options(asked)
        given = asked.model_dump(exclude_unset=True, exclude=set(REFUSED_OPTIONS))
        if not given:
            raise Problem(400, "invalid-request", "Invalid request", "the body changes nothing")
        try:
            cron = await book.change(Tenant(project_id, workspace_id), cron_id, given)
        except InvalidSchedule as exc:
            raise schedule_problem(exc) from None
        return cron_body(cron)

    @router.delete(f"{PREFIX}/runs/crons/{{cron_id}}", tags=TAGS, status_code=204)
    async def delete_cron(
        project_id: Identifier, workspace_id: Identifier, cron_id: Identifier, key: ApiKey = anyone
    ) -> Response:
        """Delete the cron (``crons.delete``): no tick fires after; runs it started go on."""
        require_role(key, "deleting a cron", WRITERS)
        await book.delete(Tenant(project_id, workspace_id), cron_id)
        return Response(status_code=204)

    return router
