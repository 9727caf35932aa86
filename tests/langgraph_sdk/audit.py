"""What a test reads besides the LangGraph client: an execution's audit trail, through
Interlock's own API (who cancelled a run, and why)."""

from __future__ import annotations

from typing import Any

import httpx

from shared.domain.threads import turn_execution_id


async def turn_audit(
    base_url: str, key: str, project: str, workspace: str, thread_id: str, turn: int = 1
) -> list[dict[str, Any]]:
    """The audit trail of turn ``turn`` of a thread (``GET .../executions/{id}/audit``)."""
    execution_id = turn_execution_id(project, workspace, thread_id, turn)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        answer = await http.get(
            f"/api/v1/projects/{project}/executions/{execution_id}/audit",
            params={"workspace_id": workspace},
            headers={"Authorization": f"Bearer {key}"},
        )
    answer.raise_for_status()
    audit: list[dict[str, Any]] = answer.json()["items"]
    return audit


def cancelled_on_disconnect(audit: list[dict[str, Any]], key: str, run_id: str) -> bool:
    """Was the turn cancelled because the client streaming ``run_id`` went away, by ``key``?"""
    key_id = key.split("_")[1]
    return any(
        entry.get("to_status") == "cancelled"
        and entry["actor"].startswith(f"key:{key_id}")
        and run_id in (entry.get("reason") or "")
        and "on_disconnect=cancel" in (entry.get("reason") or "")
        for entry in audit
    )
