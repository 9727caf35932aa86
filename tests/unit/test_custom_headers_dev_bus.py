"""Custom headers through the embedded mode's own adapters (the gateway app, the in-process bus,
SQLite store and checkpointer, as ``interlock dev`` wires them), written as the attack: the agent
gets the value, and no file of the data folder holds it; what crossed the bus was sealed, and a
set sealed under another key leaves the run without it and says so in the audit trail."""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.ledger import read_all
from interlock.dev import DevSettings, embedded
from services.gateway import app as gateway_app
from services.gateway.app import create_app
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.state_machine import CUSTOM_HEADERS_UNREADABLE
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import publish_agent_versions
from services.sandbox.app import register as register_sandbox
from shared.bus import Delivery
from shared.crypto import Keyring, new_key_entry
from shared.custom_headers import SEALED_HEADER, seal
from shared.events import DecisionSubmitted, encode_event
from shared.inprocess_bus import InProcessBus
from shared.senders import MessageSigner
from shared.store.api_keys import Role, create_key
from shared.store.ports import Store
from tests import factories as f
from tests.eventually import eventually

API = "/api/v1/projects/demo"


@dataclass
class Wire:
    """Records the headers of every message on a topic, as a consumer group of its own."""

    name: str = "wire-recorder"
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def deliver(self, delivery: Delivery) -> None:
        self.seen.append(dict(delivery.headers))


@dataclass
class Dev:
    http: httpx.AsyncClient
    store: Store
    bus: InProcessBus
    settings: DevSettings
    wires: dict[str, Wire]
    ledger: Path
    producer: MessageSigner
    """A registered outside producer, signing the decisions a test publishes on the bus."""

    async def status(self, execution_id: str, *statuses: str) -> dict[str, Any]:
        async def probe() -> dict[str, Any]:
            response = await self.http.get(
                f"{API}/executions/{execution_id}", params={"workspace_id": "default"}
            )
            return dict(response.json())

        return await eventually(
            probe, lambda b: b["status"] in statuses, what=f"{execution_id}: {statuses}"
        )

    def refund_headers(self, execution_id: str) -> dict[str, str]:
        [refund] = [e for e in read_all(self.ledger) if e["execution_id"] == execution_id]
        return dict(refund["custom_headers"])


@asynccontextmanager
async def dev_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Dev]:
    ledger = tmp_path / "ledger.jsonl"  # the agent's own record, outside the data folder
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(ledger))
    monkeypatch.delenv("INTERLOCK_ENCRYPTION_KEYS", raising=False)
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    # The tests' outside producer is registered, as one publishing decisions must be.
    producers, signer = f.outside_producer(tmp_path)
    settings = DevSettings(
        data_dir=tmp_path / "data",
        kafka_bootstrap_servers="unused:9092",
        decision_producers_file=producers,
    )
    async with embedded(settings) as wiring:
        assert isinstance(wiring.bus, InProcessBus)
        await wiring.store.ensure_indexes()
        register_orchestrator(
            wiring.bus,
            settings,
            wiring.store,
            wiring.publisher,
            erase_checkpoints=saver_eraser(wiring.checkpointer),
        )
        _, graphs = register_sandbox(
            wiring.bus, settings, wiring.store, wiring.publisher, wiring.checkpointer
        )
        topics = settings.topics
        wires = {t: Wire() for t in (topics.requested, topics.decisions, topics.dispatched)}
        for topic, wire in wires.items():
            wiring.bus.add_consumer(topic, "wire-recorder", wire)
        await publish_agent_versions(graphs, wiring.store)
        app = create_app(settings, store=wiring.store, publisher=wiring.publisher)
        _, key = await create_key(
            wiring.store.api_keys, project_id="demo", role=Role.OWNER, name="t"
        )
        await wiring.bus.start()
        try:
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://gateway",
                headers={"Authorization": f"Bearer {key}"},
            ) as http:
                yield Dev(http, wiring.store, wiring.bus, settings, wires, ledger, signer)
        finally:
            await wiring.bus.stop()


def files_holding(folder: Path, secret: str) -> list[str]:
    needle = secret.encode()
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_headers_reach_the_agent_and_rest_nowhere_in_plain_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = (f"SECRET-{secrets.token_hex(12)}" for _ in range(2))
    async with dev_mode(tmp_path, monkeypatch) as dev:
        invoked = await dev.http.post(
            f"{API}/workspaces/default/invoke",
            json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
            headers={"X-Interlock-Custom-Token": first},
        )
        assert invoked.status_code == 202, invoked.text
        execution_id = invoked.json()["execution_id"]
        await dev.status(execution_id, "suspended")
        resumed = await dev.http.post(
            f"{API}/executions/{execution_id}/resume",
            params={"workspace_id": "default"},
            json={"decision": "approve"},
            headers={"X-Interlock-Custom-Token": second},
        )
        assert resumed.status_code == 202, resumed.text
        await dev.status(execution_id, "completed")
        assert dev.refund_headers(execution_id) == {"x-interlock-custom-token": second}

        # What crossed the bus: one sealed header, never a plain custom one, never the value.
        for topic, wire in dev.wires.items():
            assert wire.seen, topic
            for headers in wire.seen:
                assert SEALED_HEADER in headers, topic
                assert not any(n.startswith("x-interlock-custom-") for n in headers), topic
                assert first not in json.dumps(headers) and second not in json.dumps(headers)
        await eventually(dev.bus.lag, lambda lag: lag == 0, what="every group caught up")

    data = dev.settings.data_dir
    assert {p.name for p in data.iterdir()} >= {
        "bus.sqlite",
        "interlock.sqlite",
        "checkpoints.sqlite",
    }
    for secret in (first, second):
        assert files_holding(data, secret) == [], secret
    # The delivered messages are gone; what is left is on topics nobody reads in this process
    # (status announcements), and none of it carries a custom header, sealed or not.
    with sqlite3.connect(data / "bus.sqlite") as db:
        left = db.execute("SELECT topic, headers FROM bus_messages").fetchall()
    consumed = set(dev.wires) | {dev.settings.topics.reported, dev.settings.topics.suspended}
    assert [topic for topic, _ in left if topic in consumed] == []
    assert all(SEALED_HEADER not in h and "x-interlock-custom-" not in h for _, h in left)


async def test_a_set_that_does_not_open_runs_without_it_and_is_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision published on the topic carrying a set sealed under a key this process does
    not hold (its in-memory key before a restart, or one rotated out)."""
    secret = f"SECRET-{secrets.token_hex(12)}"
    async with dev_mode(tmp_path, monkeypatch) as dev:
        invoked = await dev.http.post(
            f"{API}/workspaces/default/invoke",
            json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
        )
        execution_id = invoked.json()["execution_id"]
        suspended = await dev.status(execution_id, "suspended")
        foreign = Keyring.parse(new_key_entry("gone"))
        decision = DecisionSubmitted(
            execution_id=execution_id,
            project_id="demo",
            workspace_id="default",
            decision="approve",
            suspension_id=suspended["generation"],
        )
        await dev.bus.publish(
            decision,
            dev.settings.topics.decisions,
            key=execution_id,
            headers={
                **seal({"x-interlock-custom-token": secret}, foreign, execution_id),
                **dev.producer.headers(encode_event(decision)),
            },
        )
        await dev.status(execution_id, "completed")
        assert dev.refund_headers(execution_id) == {}
        audit = await dev.http.get(
            f"{API}/executions/{execution_id}/audit", params={"workspace_id": "default"}
        )
        [entry] = [a for a in audit.json()["items"] if a["action"] == CUSTOM_HEADERS_UNREADABLE]
        assert entry["actor"] == "sandbox" and "do not open" in entry["reason"]
        assert secret not in audit.text


async def test_plain_headers_from_an_outside_producer_still_reach_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The topic interface as before: a producer that put plain custom headers on the bus
    itself gets them to the agent (docs/asyncapi.yaml says to prefer the sealed header)."""
    async with dev_mode(tmp_path, monkeypatch) as dev:
        invoked = await dev.http.post(
            f"{API}/workspaces/default/invoke",
            json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
        )
        execution_id = invoked.json()["execution_id"]
        suspended = await dev.status(execution_id, "suspended")
        decision = DecisionSubmitted(
            execution_id=execution_id,
            project_id="demo",
            workspace_id="default",
            decision="approve",
            suspension_id=suspended["generation"],
        )
        await dev.bus.publish(
            decision,
            dev.settings.topics.decisions,
            key=execution_id,
            headers={
                "x-interlock-custom-tenant": "acme",
                **dev.producer.headers(encode_event(decision)),
            },
        )
        await dev.status(execution_id, "completed")
        assert dev.refund_headers(execution_id) == {"x-interlock-custom-tenant": "acme"}


@pytest.mark.parametrize("route", ["invoke", "resume"])
@pytest.mark.parametrize(
    ("extra", "detail"),
    [
        ({f"X-Interlock-Custom-H{i}": "v" for i in range(33)}, "more than 32"),
        ({"X-Interlock-Custom-Big": "v" * 4097}, "4097 bytes"),
        ({f"X-Interlock-Custom-H{i}": "v" * 3000 for i in range(3)}, "8192 bytes in all"),
    ],
    ids=["count", "value", "total"],
)
async def test_custom_headers_over_a_limit_are_a_400_problem_and_nothing_is_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str, extra: dict[str, str], detail: str
) -> None:
    async with dev_mode(tmp_path, monkeypatch) as dev:
        if route == "invoke":
            response = await dev.http.post(
                f"{API}/workspaces/default/invoke",
                json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
                headers=extra,
            )
        else:
            response = await dev.http.post(
                f"{API}/executions/anything/resume",
                params={"workspace_id": "default"},
                json={"decision": "approve"},
                headers=extra,
            )
        assert response.status_code == 400, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"].endswith("/custom-headers-too-large")
        assert detail in problem["detail"]
        assert problem["limits"] == {"count": 32, "value_bytes": 4096, "total_bytes": 8192}
        assert await dev.bus.lag() == 0 and all(not w.seen for w in dev.wires.values())
        listed = await dev.http.get(f"{API}/executions", params={"workspace_id": "default"})
        assert listed.json()["items"] == []
