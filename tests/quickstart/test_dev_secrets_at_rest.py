"""Issue 17, finding 6, as the attack on ``interlock dev`` (one process, its own key in memory):
after a run with a caller's custom header, a byte search of the data folder finds no header
value, the delivered messages are gone from ``bus.sqlite``, and the agent received it."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import httpx
import pytest

from agents.ledger import read_all
from tests.quickstart.test_dev_mode import API, KEY, Dev

pytestmark = pytest.mark.quickstart


def files_holding(folder: Path, needle: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_a_custom_header_value_rests_nowhere_in_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INTERLOCK_ENCRYPTION_KEYS", raising=False)  # dev mode's in-memory key
    ledger = tmp_path / "ledger.jsonl"  # what the agent saw, kept outside the data folder
    dev = Dev(tmp_path / "data", extra_env={"INTERLOCK_AGENT_LEDGER": str(ledger)})
    first, second = (f"end-user-token-{secrets.token_hex(16)}" for _ in range(2))
    auth = {"Authorization": f"Bearer {KEY}"}
    try:
        dev.start()
        invoked = httpx.post(
            f"{dev.url}{API}/workspaces/default/invoke",
            json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
            headers={**auth, "X-Interlock-Custom-Token": first},
            timeout=30,
        )
        assert invoked.status_code == 202, invoked.text
        execution_id = invoked.json()["execution_id"]
        dev.wait_for(execution_id, "suspended")
        resumed = httpx.post(
            f"{dev.url}{API}/executions/{execution_id}/resume",
            params={"workspace_id": "default"},
            json={"decision": "approve"},
            headers={**auth, "X-Interlock-Custom-Token": second},
            timeout=30,
        )
        assert resumed.status_code == 202, resumed.text
        dev.wait_for(execution_id, "completed")
    finally:
        dev.stop()  # stopping prunes what every group has committed

    [refund] = [e for e in read_all(ledger) if e["execution_id"] == execution_id]
    assert refund["custom_headers"] == {"x-interlock-custom-token": second}
    assert files_holding(dev.data, execution_id), "the search must see the execution's data"
    for secret in (first, second):
        assert files_holding(dev.data, secret) == [], secret
        assert secret not in dev.log.read_text(errors="replace")

    # What is left on the bus is only what nobody in the process reads (status announcements,
    # dead letters): every message that carried the headers was delivered and deleted.
    with sqlite3.connect(dev.data / "bus.sqlite") as db:
        left = db.execute("SELECT topic, headers FROM bus_messages").fetchall()
        offsets = db.execute("SELECT COUNT(*) FROM bus_offsets").fetchone()[0]
    assert offsets > 0, "the groups committed their offsets"
    carried = ("execution.requested", "decision.submitted", "execution.dispatched")
    assert [topic for topic, _ in left if topic in carried] == []
    assert all(
        "interlock-sealed-headers" not in h and "x-interlock-custom" not in h for _, h in left
    )
