"""Approvals toward a decision that needs several people, counted the same way whichever channel
brought them (the gateway's resume routes and links, an outside producer on the bus): one per
identity, of the same answer, from keys that are still valid when the quorum is checked."""

from __future__ import annotations

from shared.store.approvals import Approval
from shared.store.ports import Store


async def record_and_count(
    store: Store, approval: Approval, *, just_checked: str | None
) -> tuple[list[Approval], list[str]]:
    """Record ``approval``; the approvals of the same answer that count, and why the others no
    longer do. ``just_checked`` is the API key that authenticated this very approval (not read
    again)."""
    await store.approvals.record(approval)
    everyone = await store.approvals.list(approval.execution_id, approval.generation)
    same = [a for a in everyone if a.answer_key == approval.answer_key]
    return await still_valid(store, same, just_checked=just_checked)


async def still_valid(
    store: Store, approvals: list[Approval], *, just_checked: str | None
) -> tuple[list[Approval], list[str]]:
    """Split approvals into those that still count and, for the others, why not: an API key
    revoked (or deleted) since it approved no longer speaks for anyone. One key read per other
    approving key."""
    counted: list[Approval] = []
    discounted: list[str] = []
    for approval in approvals:
        if approval.key_id is not None and approval.key_id != just_checked:
            key = await store.api_keys.get(approval.key_id)
            if key is None or key.revoked_at is not None:
                when = f" at {key.revoked_at.isoformat()}" if key and key.revoked_at else ""
                discounted.append(f"{approval.reviewer}: key revoked{when}")
                continue
        counted.append(approval)
    return counted, discounted
