"""In-memory adapter of shared/store/api_keys.py."""

from __future__ import annotations

from shared.events import utc_now
from shared.store.api_keys import ApiKey


class InMemoryApiKeys:
    def __init__(self) -> None:
        self._keys: dict[str, ApiKey] = {}

    async def add(self, key: ApiKey) -> None:
        self._keys.setdefault(key.key_id, key)

    async def get(self, key_id: str) -> ApiKey | None:
        return self._keys.get(key_id)

    async def list(self, project_id: str) -> list[ApiKey]:
        return sorted(
            (k for k in self._keys.values() if k.project_id == project_id),
            key=lambda k: k.created_at,
        )

    async def revoke(self, project_id: str, key_id: str) -> bool:
        key = self._keys.get(key_id)
        if key is None or key.project_id != project_id:
            return False
        if key.revoked_at is None:
            self._keys[key_id] = key.model_copy(update={"revoked_at": utc_now()})
        return True
