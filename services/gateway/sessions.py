"""Sessions on Interlock's own API: a conversation of turns, each an execution (the Atlas
invoke's ``X-Session-ID``; the same thing as a LangGraph thread, and the same store record, so a
session started here reads as a thread there). ``POST .../invoke`` with a ``session_id`` (or the
``X-Session-ID`` header) runs the message as the session's next turn, after its busy turn by the
``multitask_strategy``; ``GET .../sessions/{session_id}`` lists its turns."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from services.gateway.auth import ANY_ROLE, OWNERS, access, require_role
from services.gateway.bodies import api_router
from services.gateway.conversations import RACES, Conversations, TurnTaken, WrongAgent
from services.gateway.openapi import API, ProjectPath, WorkspaceQuery
from services.gateway.problems import Problem
from services.gateway.schemas import InvokeRequest, SessionTurn, SessionView
from shared.domain.execution import Execution
from shared.domain.threads import ThreadBusy, turn_number
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.ports import Store

SESSION_HEADER = "X-Session-ID"
MAX_LISTED_TURNS = 100


def session_of(in_body: str | None, in_header: str | None) -> str | None:
    """The session a request continues, from its body or its ``X-Session-ID``; a 400 when the
    two disagree."""
    if in_body is not None and in_header is not None and in_body != in_header:
        raise Problem(
            400,
            "session-mismatch",
            "Sessions disagree",
            f"the {SESSION_HEADER} header ({in_header!r}) and the body's session_id"
            f" ({in_body!r}) differ: send one of them, or the same id in both",
        )
    return in_body if in_body is not None else in_header


async def invoke_turn(
    conversations: Conversations,
    store: Store,
    *,
    project_id: str,
    workspace_id: str,
    session_id: str,
    body: InvokeRequest,
    key: ApiKey,
    headers: dict[str, str],
) -> Execution:
    """Run ``body`` as the session's next turn (the session is created by its first)."""
    if body.idempotency_key is not None:
        raise Problem(
            400,
            "session-idempotency-key",
            "Idempotency key on a session",
            "a session's turn is not keyed: each message is a turn of its own; send"
            " idempotency_key without session_id for a keyed one-off execution",
        )
    # Read first: a session's later turns find it (one read), only its first creates it.
    record = await store.threads.get(project_id, workspace_id, session_id)
    if record is None:
        record, _ = await store.threads.create(
            conversations.new_thread(project_id, workspace_id, session_id)
        )
    if record.deleted:
        raise Problem(
            409,
            "session-deleted",
            "Session was deleted",
            f"session {session_id} was deleted (its thread through the LangGraph API), and a"
            " deleted session's id is not reused: start a session under another id",
        )
    policy = body.multitask_strategy or "enqueue"
    for _ in range(RACES):
        try:
            plan = await conversations.plan(record, body.agent, policy)
        except WrongAgent as wrong:
            raise Problem(
                409,
                "session-agent-mismatch",
                "Agent does not match the session",
                f"session {session_id} is a conversation with agent {wrong.agent!r}, not"
                f" {body.agent!r}: a session carries one agent's state",
                session_agent=wrong.agent,
            ) from None
        except ThreadBusy as busy:
            raise Problem(
                409,
                "session-busy",
                "Session is busy",
                f"session {session_id} has a turn {busy.latest.status.value}: wait for it, answer"
                " its review, or send another multitask_strategy (enqueue, interrupt, rollback)",
                execution_id=busy.latest.execution_id,
                execution_status=busy.latest.status.value,
            ) from None
        if plan.cancels is not None:
            require_role(key, f"a turn with multitask_strategy={policy}", OWNERS)
        try:
            return await conversations.start(
                record,
                plan,
                agent=body.agent,
                given=body.agent_input(),
                policy=policy,
                requested_by=key.principal,
                requester_identity=key.identity,
                headers=headers,
            )
        except TurnTaken:
            continue
    raise Problem(
        409, "session-busy", "Session is busy", f"session {session_id} kept taking new turns"
    )


def sessions_router(conversations: Conversations, store: Store, keys: ApiKeys) -> APIRouter:
    router = api_router()
    reader = Depends(access(keys, "reading", ANY_ROLE))

    @router.get(f"{API}/sessions/{{session_id}}", response_model=SessionView, tags=["sessions"])
    async def get_session(
        project_id: ProjectPath,
        session_id: Identifier,
        workspace_id: WorkspaceQuery,
        limit: Annotated[int, Query(ge=1, le=MAX_LISTED_TURNS)] = 20,
        key: ApiKey = reader,
    ) -> SessionView:
        """The session and its latest turns, newest first."""
        record = await store.threads.get(project_id, workspace_id, session_id)
        if record is None or record.deleted:
            raise Problem(
                404, "session-not-found", "Session not found", f"no session {session_id} here"
            )
        latest = await conversations.latest(record)
        turns = [] if latest is None else [latest, *await conversations.earlier(latest, limit - 1)]
        return SessionView(
            session_id=record.thread_id,
            created_at=record.created_at,
            metadata=record.metadata,
            turns=[
                SessionTurn(
                    turn=turn_number(t),
                    execution_id=t.execution_id,
                    status=t.status,
                    created_at=t.created_at,
                )
                for t in turns
            ],
        )

    return router
