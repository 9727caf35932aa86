"""The effects sink ``interlock dev`` hosts: each idempotency key applied once, kept on disk."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from interlock.effects_sink import EffectsLedger, effects_router


def test_a_key_is_applied_once_and_a_repeat_gets_the_first_answer() -> None:
    ledger = EffectsLedger(":memory:")
    first = ledger.apply("email", "k1", {"to": "a@example.com"})
    again = ledger.apply("email", "k1", {"to": "a@example.com"})
    other = ledger.apply("email", "k2", {"to": "b@example.com"})
    assert first.applied and not again.applied and other.applied
    assert again.message_id == first.message_id != other.message_id
    seen = ledger.calls()
    assert [(call.key, call.applied) for call in seen.calls] == [
        ("k1", True),
        ("k1", False),
        ("k2", True),
    ]
    assert seen.applied == 2


def test_the_ledger_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "effects.sqlite"
    before = EffectsLedger(path)
    sent = before.apply("email", "k1", {"subject": "Stage 1"})
    before.close()
    after = EffectsLedger(path)
    repeat = after.apply("email", "k1", {"subject": "Stage 1"})
    assert not repeat.applied and repeat.message_id == sent.message_id
    assert [call.body for call in after.calls().calls] == [{"subject": "Stage 1"}] * 2


def test_the_http_routes() -> None:
    app = FastAPI()
    app.include_router(effects_router(EffectsLedger(":memory:")))
    client = TestClient(app)
    posted = client.post(
        "/dev/effects/payment", json={"amount": 240}, headers={"Idempotency-Key": "pay-1"}
    )
    assert posted.status_code == 200 and posted.json()["applied"] is True
    unkeyed = client.post("/dev/effects/payment", json={"amount": 240})
    assert unkeyed.status_code == 400 and "Idempotency-Key" in unkeyed.text
    listed = client.get("/dev/effects").json()
    assert listed["applied"] == 1
    assert listed["calls"][0]["kind"] == "payment" and listed["calls"][0]["body"] == {"amount": 240}
