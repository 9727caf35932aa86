"""The LangGraph API's routes, under ``/langgraph/projects/{project_id}/workspaces/{workspace_id}``
(a langgraph-sdk client's ``url``). Authentication is the API's keys (``x-api-key``, which the
client sends, or ``Authorization: Bearer``); each route checks the role the matching Interlock
route needs once its body says what is asked.

Waits, joins and streams are held as Interlock's execution streams are, by the same
``StreamBounds`` of the process (services/gateway/stream.py): one cap per key across all of them
(429 ``too-many-streams`` beyond, before any run starts), the key re-checked every
``INTERLOCK_STREAM_KEY_CHECK_SECONDS`` (a revoked key's wait or join answers 401, its stream ends
with an ``error`` event), and at most ``INTERLOCK_STREAM_MAX_SECONDS`` held."""

from __future__ import annotations

import itertools
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from services.gateway.auth import ANY_ROLE, WRITERS, access, require_role
from services.gateway.bodies import api_router, json_object
from services.gateway.langgraph.requests import (
    RunRequest,
    TtlField,
    run_request,
    ttl_minutes,
    unsupported,
)
from services.gateway.langgraph.search import Order, SortBy, SortOrder
from services.gateway.langgraph.service import (
    LangGraphService,
    Scope,
    StartedRun,
)
from services.gateway.langgraph.stream_routes import add_stream_routes
from services.gateway.langgraph.views import (
    ThreadView,
    checkpoint_of,
    result_of,
    run_body,
    state_of,
    thread_filter,
)
from services.gateway.openapi import json_body
from services.gateway.problems import Problem
from shared.custom_headers import within_limits
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.runs import run_id
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys

PREFIX = "/langgraph/projects/{project_id}/workspaces/{workspace_id}"
TAGS: list[str | Any] = ["langgraph"]
RawBody = Annotated[Any, Body(include_in_schema=False)]
RUN_BODY = json_body(RunRequest, required=True)


class ThreadCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread_id: Identifier | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: Any = None
    ttl: TtlField = None
    graph_id: str | None = None


class ThreadSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=10_000)
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    ids: list[Identifier] | None = Field(default=None, max_length=100)
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    sort_by: SortBy | None = None
    sort_order: SortOrder | None = None
    select: list[str] | None = None
    extract: dict[str, Any] | None = None

    def order(self) -> Order | None:
        """The order asked for, None when neither ``sort_by`` nor ``sort_order`` is given."""
        if self.sort_by is None and self.sort_order is None:
            return None
        return Order(self.sort_by or "updated_at", self.sort_order or "desc")


class ThreadUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl: TtlField = None


class StateUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] | None = None
    as_node: str | None = Field(default=None, max_length=256)
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = Field(default=None, max_length=256)


class HistoryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=10, ge=1, le=1000)
    before: Any = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    select: list[str] | None = None


def selected(body: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """Only the fields a ``select`` asks for (all without one); an unknown one is left out."""
    return body if not fields else {k: v for k, v in body.items() if k in fields}


def build_langgraph_router(service: LangGraphService, keys: ApiKeys) -> APIRouter:
    """Threads and runs (assistants: services/gateway/langgraph/assistants.py)."""
    router = api_router()
    # A dependency as a default: the annotations are strings here (postponed), and FastAPI
    # cannot resolve names local to this function from a string.
    anyone = Depends(access(keys, "reading", ANY_ROLE))

    def scope_of(project_id: str, workspace_id: str) -> Scope:
        return Scope(project_id, workspace_id)

    @router.post(
        f"{PREFIX}/threads", tags=TAGS, openapi_extra=json_body(ThreadCreate, required=False)
    )
    async def create_thread(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> dict[str, Any]:
        """A new thread (its run starts with ``runs.create`` and an input)."""
        require_role(key, "creating a thread", WRITERS)
        asked = json_object(raw, ThreadCreate, required=False)
        if asked.supersteps is not None:
            raise unsupported("supersteps: a thread starts empty")
        metadata = {**asked.metadata, **({"graph_id": asked.graph_id} if asked.graph_id else {})}
        scope = scope_of(project_id, workspace_id)
        record, created = await service.create_thread(
            scope, asked.thread_id, metadata, asked.if_exists, ttl_minutes(asked.ttl)
        )
        # A thread just created has run nothing yet: no read of its turns.
        if created:
            return ThreadView(record, None).body()
        return (await service.thread_view(scope, record.thread_id)).body()

    @router.post(
        f"{PREFIX}/threads/search", tags=TAGS, openapi_extra=json_body(ThreadSearch, required=False)
    )
    async def search_threads(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> list[dict[str, Any]]:
        """Threads of the workspace, by ``status``, ``ids``, ``metadata`` and ``values``, in the
        order asked (services/gateway/langgraph/search.py)."""
        asked = json_object(raw, ThreadSearch, required=False)
        refused = [name for name in ("select", "extract") if getattr(asked, name)]
        if refused:
            raise unsupported(
                f"{', '.join(refused)}: threads are searched by status, ids, metadata and values"
            )
        matches = thread_filter(asked.metadata, asked.values)
        order = asked.order()
        if asked.ids is not None:
            views = await service.finder.by_ids(
                project_id, workspace_id, asked.ids, asked.status, matches
            )
            views = (order.sort(views) if order else views)[
                asked.offset : asked.offset + asked.limit
            ]
        else:
            views = await service.finder.search(
                project_id, workspace_id, asked.status, asked.limit, asked.offset, matches, order
            )
        return [view.body() for view in views]

    @router.get(f"{PREFIX}/threads/{{thread_id}}", tags=TAGS)
    async def get_thread(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        return (await service.thread_view(scope_of(project_id, workspace_id), thread_id)).body()

    @router.get(f"{PREFIX}/threads/{{thread_id}}/state", tags=TAGS)
    async def get_state(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """The thread's values, and its waiting task with the interrupts to answer."""
        view = await service.thread_view(scope_of(project_id, workspace_id), thread_id)
        return state_of(view.record, view.execution, view.earlier)

    @router.patch(
        f"{PREFIX}/threads/{{thread_id}}",
        tags=TAGS,
        openapi_extra=json_body(ThreadUpdate, required=True),
    )
    async def update_thread(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """Merge ``metadata`` into the thread's (``threads.update``)."""
        require_role(key, "updating a thread", WRITERS)
        asked = json_object(raw, ThreadUpdate, required=True)
        view = await service.update_thread(
            scope_of(project_id, workspace_id), thread_id, asked.metadata, ttl_minutes(asked.ttl)
        )
        return view.body()

    @router.post(
        f"{PREFIX}/threads/{{thread_id}}/state",
        tags=TAGS,
        openapi_extra=json_body(StateUpdate, required=True),
    )
    async def update_state(
        request: Request,
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """Write the thread's state as a node's output (``threads.update_state``): a turn of
        its own, audited with who wrote what; answered once written, with its checkpoint."""
        require_role(key, "updating a thread's state", WRITERS)
        asked = json_object(raw, StateUpdate, required=True)
        fork = asked.checkpoint_id or (asked.checkpoint or {}).get("checkpoint_id")
        execution = await service.update_state(
            scope_of(project_id, workspace_id),
            thread_id,
            asked.values or {},
            asked.as_node,
            None if fork is None else str(fork),
            key,
            within_limits(request.headers.items()),
        )
        if execution.status is not ExecutionStatus.COMPLETED:
            error = execution.error or {}
            raise Problem(
                400,
                "state-update-refused",
                "State update refused",
                f"the graph refused the update: {error.get('message', execution.status.value)}",
                error_type=error.get("error_type"),
            )
        return {"checkpoint": checkpoint_of(thread_id, execution)}

    @router.post(f"{PREFIX}/threads/{{thread_id}}/copy", tags=TAGS)
    async def copy_thread(
        request: Request,
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """A new thread with this one's state and metadata (``threads.copy``)."""
        require_role(key, "copying a thread", WRITERS)
        view = await service.copy_thread(
            scope_of(project_id, workspace_id),
            thread_id,
            key,
            within_limits(request.headers.items()),
        )
        return view.body()

    @router.delete(f"{PREFIX}/threads/{{thread_id}}", tags=TAGS, status_code=204)
    async def delete_thread(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        key: ApiKey = anyone,
    ) -> Response:
        """Delete the thread (``threads.delete``): gone at once; its checkpoints, durable steps
        and progress erased within moments, its audit kept or erased by the deployment's policy
        (docs/langgraph-api.md, "Deleting a thread")."""
        await service.delete_thread(scope_of(project_id, workspace_id), thread_id, key)
        return Response(status_code=204)

    @router.post(
        f"{PREFIX}/threads/{{thread_id}}/history",
        tags=TAGS,
        openapi_extra=json_body(HistoryRequest, required=False),
    )
    async def thread_history(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> list[dict[str, Any]]:
        """The thread's states, newest first, one per turn of the branch it is on
        (``threads.get_history``)."""
        asked = json_object(raw, HistoryRequest, required=False)
        refused = [n for n in ("before", "metadata", "checkpoint") if getattr(asked, n)]
        if refused:
            raise unsupported(f"{', '.join(refused)}: the history is read newest first, by limit")
        views = await service.history(scope_of(project_id, workspace_id), thread_id, asked.limit)
        states = [state_of(v.record, v.execution, v.earlier) for v in views]
        # Each state's parent is the turn it started from: the next one listed, and for the
        # last one listed its base, or the thread's start (epoch-0) for the first turn. A run
        # from a parent with no input runs the turn after it again (Agent Chat UI's regenerate).
        for state, parent in itertools.pairwise(states):
            state["parent_checkpoint"] = parent["checkpoint"]
        if views:
            states[-1]["parent_checkpoint"] = checkpoint_of(thread_id, views[-1].earlier)
        return [selected(state, asked.select) for state in states]

    @router.get(f"{PREFIX}/threads/{{thread_id}}/runs", tags=TAGS)
    async def list_runs(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
        offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
        status: Annotated[str | None, Query()] = None,
        select: Annotated[list[str] | None, Query()] = None,
        key: ApiKey = anyone,
    ) -> list[dict[str, Any]]:
        """The thread's runs, newest first (``runs.list``)."""
        scope = scope_of(project_id, workspace_id)
        if status is None:
            runs = await service.runs(scope, thread_id, limit, offset)
            bodies = [run_body(thread_id, execution, epoch) for execution, epoch in runs]
        else:
            # By status: a bounded read of the newest runs, filtered.
            runs = await service.runs(scope, thread_id, 1000, 0)
            bodies = [run_body(thread_id, execution, epoch) for execution, epoch in runs]
            bodies = [b for b in bodies if b["status"] == status][offset : offset + limit]
        return [selected(body, select) for body in bodies]

    def run_path(started: StartedRun) -> str:
        """Relative to the API's root (the client's ``url``), as langgraph-sdk resolves it."""
        run = run_id(started.execution.execution_id, started.epoch)
        return f"/threads/{started.thread.thread_id}/runs/{run}"

    async def create_run(
        request: Request,
        response: Response,
        scope: Scope,
        thread_id: str | None,
        raw: Any,
        key: ApiKey,
    ) -> dict[str, Any]:
        body = run_request(raw)
        thread = thread_id or str(uuid.uuid4())
        async with service.start(
            scope,
            thread,
            body,
            key,
            within_limits(request.headers.items()),
            stateless=thread_id is None,
        ) as (started, _):
            pass
        response.headers["Content-Location"] = run_path(started)
        return run_body(started.thread.thread_id, started.execution, started.epoch)

    async def wait_run(
        request: Request,
        response: Response,
        scope: Scope,
        thread_id: str | None,
        raw: Any,
        key: ApiKey,
    ) -> dict[str, Any]:
        body = run_request(raw)
        if body.on_disconnect == "cancel":
            raise unsupported(
                "on_disconnect=cancel on runs.wait: a run is cancelled when its client goes on"
                " streams (runs.stream); a wait's run goes on (on_disconnect=continue)"
            )
        thread = thread_id or str(uuid.uuid4())
        # Watched from before the run starts: nothing it does falls before the watch.
        async with service.start(
            scope,
            thread,
            body,
            key,
            within_limits(request.headers.items()),
            stateless=thread_id is None,
            watch=True,
        ) as (started, watch):
            assert watch is not None
            execution = await service.wait(watch, started.execution, started.epoch)
        response.headers["Content-Location"] = run_path(started)
        # Where langgraph-sdk reconnects if this response is cut off (a gateway restart).
        response.headers["Location"] = f"{run_path(started)}/join"
        return result_of(execution, await service.earlier_of(execution))

    @router.post(f"{PREFIX}/threads/{{thread_id}}/runs", tags=TAGS, openapi_extra=RUN_BODY)
    async def create_thread_run(
        request: Request,
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """Start the thread's run: with ``input`` its execution, with ``command.resume`` the
        decision on its interrupt (as the resume route judges it). Answers at once."""
        scope = scope_of(project_id, workspace_id)
        return await create_run(request, response, scope, thread_id, raw, key)

    @router.post(f"{PREFIX}/runs", tags=TAGS, openapi_extra=RUN_BODY)
    async def create_stateless_run(
        request: Request,
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """A run on a new thread."""
        scope = scope_of(project_id, workspace_id)
        return await create_run(request, response, scope, None, raw, key)

    @router.post(f"{PREFIX}/threads/{{thread_id}}/runs/wait", tags=TAGS, openapi_extra=RUN_BODY)
    async def wait_thread_run(
        request: Request,
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """Start a run and answer once it stops: the state, with ``__interrupt__`` when it
        waits for a decision, or ``__error__``."""
        scope = scope_of(project_id, workspace_id)
        return await wait_run(request, response, scope, thread_id, raw, key)

    @router.post(f"{PREFIX}/runs/wait", tags=TAGS, openapi_extra=RUN_BODY)
    async def wait_stateless_run(
        request: Request,
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        scope = scope_of(project_id, workspace_id)
        return await wait_run(request, response, scope, None, raw, key)

    add_stream_routes(router, service, anyone)

    @router.get(f"{PREFIX}/threads/{{thread_id}}/runs/{{run}}", tags=TAGS)
    async def get_run(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        run: Identifier,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        record, execution, epoch = await service.run_of(
            scope_of(project_id, workspace_id), thread_id, run
        )
        return run_body(record.thread_id, execution, epoch)

    @router.get(f"{PREFIX}/threads/{{thread_id}}/runs/{{run}}/join", tags=TAGS)
    async def join_run(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        run: Identifier,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """The thread's state once the run stopped (as ``runs.wait`` answers)."""
        scope = scope_of(project_id, workspace_id)
        _, execution, epoch = await service.run_of(scope, thread_id, run)
        async with service.watching(scope, execution.execution_id, key) as watch:
            # Read again once watched: what changed before the watch began is in this read.
            execution = await service.wait(watch, await service.reread(execution), epoch)
        return result_of(execution, await service.earlier_of(execution))

    @router.post(f"{PREFIX}/threads/{{thread_id}}/runs/{{run}}/cancel", tags=TAGS)
    async def cancel_run(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        run: Identifier,
        wait: Annotated[int, Query(ge=0, le=1)] = 0,
        action: Annotated[Literal["interrupt", "rollback"], Query()] = "interrupt",
        key: ApiKey = anyone,
    ) -> Response:
        """Cancel the thread's execution (its current run, or the interrupted thread): what
        Interlock's cancel route does. ``rollback`` is not supported."""
        if action != "interrupt":
            raise unsupported("action=rollback: a cancelled execution keeps its history")
        scope = scope_of(project_id, workspace_id)

        async def cancelled() -> tuple[Execution, int]:
            _, execution, epoch = await service.run_of(scope, thread_id, run)
            if epoch < execution.epoch:
                raise Problem(
                    409,
                    "run-finished",
                    "Run finished",
                    f"run {run} has finished; cancel the thread's latest run",
                )
            return await service.cancel(scope, execution, key), epoch

        if not wait:
            # Not held: a key at its cap of waits may still cancel.
            await cancelled()
            return Response(status_code=202)
        _, current, _ = await service.run_of(scope, thread_id, run)
        async with service.watching(scope, current.execution_id, key) as watch:
            execution, epoch = await cancelled()
            execution = await service.wait(watch, execution, None)
        return JSONResponse(run_body(thread_id, execution, epoch))

    return router
