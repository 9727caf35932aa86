"""The development effects sink: a fake mail and payments API that ``interlock dev`` hosts.

Agents with side effects (``outreach`` sends emails) need somewhere to send them; in dev mode
that is this sink, under ``/dev`` on the gateway's own port, so every shipped example works with
nothing else running. Like a real payments or mail API, it applies each ``Idempotency-Key`` once
and answers a repeat with the first answer; unlike one, it shows everything it received
(``GET /dev/effects``), so the replay guarantee can be seen: across a restart of ``interlock
dev`` an email is still applied once. Its ledger is a SQLite file next to dev mode's other data.

It is mounted only in the development environment: it takes writes without a key.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Header, HTTPException
from pydantic import BaseModel, JsonValue

PREFIX = "/dev"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body TEXT NOT NULL,
    applied INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    received_at TEXT NOT NULL
)
"""


class EffectAnswer(BaseModel):
    message_id: str
    applied: bool
    """False: this key was applied before; nothing happened this time."""


class EffectCall(BaseModel):
    kind: str
    key: str
    body: JsonValue
    applied: bool
    message_id: str
    received_at: datetime


class EffectCalls(BaseModel):
    applied: int
    """How many calls took effect: one per idempotency key."""
    calls: list[EffectCall]


class EffectsLedger:
    """Every call, in order, with whether it took effect; ``path=":memory:"`` for tests."""

    def __init__(self, path: Path | str) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute(_SCHEMA)
        self._db.commit()
        # One writer at a time: the first call with a key must be the one that applies it.
        self._lock = threading.Lock()

    def apply(self, kind: str, key: str, body: Any) -> EffectAnswer:
        with self._lock:
            first = self._db.execute(
                "SELECT message_id FROM effects WHERE idempotency_key = ? AND applied = 1",
                (key,),
            ).fetchone()
            message_id = first[0] if first else f"msg-{uuid.uuid4().hex[:12]}"
            self._db.execute(
                "INSERT INTO effects (kind, idempotency_key, body, applied, message_id,"
                " received_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    key,
                    json.dumps(body),
                    first is None,
                    message_id,
                    datetime.now(UTC).isoformat(),
                ),
            )
            self._db.commit()
        return EffectAnswer(message_id=message_id, applied=first is None)

    def calls(self) -> EffectCalls:
        with self._lock:
            rows = self._db.execute(
                "SELECT kind, idempotency_key, body, applied, message_id, received_at"
                " FROM effects ORDER BY seq"
            ).fetchall()
        calls = [
            EffectCall(
                kind=kind,
                key=key,
                body=json.loads(body),
                applied=bool(applied),
                message_id=message_id,
                received_at=datetime.fromisoformat(received_at),
            )
            for kind, key, body, applied, message_id, received_at in rows
        ]
        return EffectCalls(applied=sum(call.applied for call in calls), calls=calls)

    def close(self) -> None:
        self._db.close()


def effects_router(ledger: EffectsLedger) -> APIRouter:
    # Plain (not async) routes: FastAPI runs them on its thread pool, so SQLite never blocks
    # the event loop the agents' own requests to the sink are answered on.
    router = APIRouter(prefix=PREFIX, tags=["development effects sink"])

    @router.post("/effects/{kind}", summary="Apply a side effect once per Idempotency-Key")
    def apply_effect(
        kind: str,
        body: dict[str, JsonValue],
        idempotency_key: str | None = Header(default=None),
    ) -> EffectAnswer:
        if not idempotency_key:
            raise HTTPException(400, "an Idempotency-Key header is required")
        return ledger.apply(kind, idempotency_key, body)

    @router.get("/effects", summary="Everything the sink received, in order")
    def list_effects() -> EffectCalls:
        return ledger.calls()

    return router
