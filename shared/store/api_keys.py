"""API keys: random secrets shown once, stored only as a hash, scoped to one project, with a role.

A secret looks like ``ilk_<key id>_<43 random url-safe characters>``. The key id in it finds the
record; the SHA-256 of the whole secret must match the stored hash (compared in constant time).
A high-entropy random secret needs no slow hash: there is nothing to guess. Revoking sets
``revoked_at``; a revoked key never authenticates again.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.domain.principals import Reviewer, key_identity
from shared.events import Identifier, utc_now

SECRET_PREFIX = "ilk_"
DEVELOPMENT_KEY_ID = "00000000000000de"
"""The id of the well-known key ``make dev`` prints (``interlock/dev.py``): refused by id in every
environment but development, whatever a store holds."""


class Role(StrEnum):
    """Atlas-style project roles, strongest first."""

    OWNER = "PROJECT_OWNER"
    MEMBER = "PROJECT_MEMBER"
    READ_ONLY = "PROJECT_READ_ONLY"


class ApiKey(BaseModel):
    model_config = ConfigDict(frozen=True)

    key_id: str
    project_id: Identifier
    role: Role
    name: str = Field(min_length=1, max_length=128)
    workspaces: list[str] | None = None
    """The workspaces the key may touch; None: every workspace of the project."""
    email: str | None = Field(default=None, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    """The person the key was issued to. Separation of duties counts people: keys (and
    notification links) of one email are one identity, and a link decides a request that its
    requester may not decide only when the requesting key names its person."""
    secret_hash: str
    created_at: datetime = Field(default_factory=utc_now)
    revoked_at: datetime | None = None

    @property
    def principal(self) -> str:
        """Who acted, as the audit trail records it."""
        return f"key:{self.key_id} ({self.name})"

    @property
    def identity(self) -> str:
        """Who the key's holder is for separation of duties (shared/domain/principals.py)."""
        return key_identity(self.key_id, self.email)

    def as_reviewer(self) -> Reviewer:
        return Reviewer.of_key(self.key_id, self.name, self.email)

    def may_use(self, project_id: str, workspace_id: str | None) -> bool:
        if project_id != self.project_id:
            return False
        return workspace_id is None or self.workspaces is None or workspace_id in self.workspaces


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> tuple[str, str]:
    """A fresh ``(key_id, secret)``."""
    key_id = secrets.token_hex(8)
    return key_id, f"{SECRET_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def key_id_of(secret: str) -> str | None:
    if not secret.startswith(SECRET_PREFIX):
        return None
    key_id, sep, rest = secret[len(SECRET_PREFIX) :].partition("_")
    if not sep or not rest or len(key_id) != 16 or not all(c in "0123456789abcdef" for c in key_id):
        return None
    return key_id


def matches(key: ApiKey, secret: str) -> bool:
    return hmac.compare_digest(key.secret_hash, hash_secret(secret))


class ApiKeys(Protocol):
    async def add(self, key: ApiKey) -> None:
        """Store a new key (its id is fresh and random)."""
        ...

    async def get(self, key_id: str) -> ApiKey | None: ...

    async def list(self, project_id: str) -> list[ApiKey]: ...

    async def revoke(self, project_id: str, key_id: str) -> bool:
        """Revoke a key of the project; False when there is no such key."""
        ...


async def create_key(
    keys: ApiKeys,
    *,
    project_id: str,
    role: Role,
    name: str,
    workspaces: list[str] | None = None,
    secret: str | None = None,
    email: str | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret, which is not stored and cannot be shown
    again. ``secret`` fixes the secret (the development bootstrap key only)."""
    if secret is None:
        key_id, secret = new_secret()
    else:
        found = key_id_of(secret)
        if found is None:
            raise ValueError(f"a key secret looks like {SECRET_PREFIX}<16 hex>_<random>")
        key_id = found
    key = ApiKey(
        key_id=key_id,
        project_id=project_id,
        role=role,
        name=name,
        workspaces=workspaces,
        email=email,
        secret_hash=hash_secret(secret),
    )
    await keys.add(key)
    return key, secret


async def authenticate(keys: ApiKeys, secret: str) -> ApiKey | None:
    key_id = key_id_of(secret)
    if key_id is None:
        return None
    key = await keys.get(key_id)
    if key is None or key.revoked_at is not None or not matches(key, secret):
        return None
    return key


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


class MongoApiKeys:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["api_keys"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index([("project_id", 1), ("created_at", 1)])

    async def add(self, key: ApiKey) -> None:
        document = key.model_dump(mode="json")
        document["_id"] = document.pop("key_id")
        # A concurrent add of the same key inserted it first (two gateways creating the dev key).
        with contextlib.suppress(DuplicateKeyError):
            await self._collection.update_one(
                {"_id": document["_id"]}, {"$setOnInsert": document}, upsert=True
            )

    async def get(self, key_id: str) -> ApiKey | None:
        document = await self._collection.find_one({"_id": key_id})
        return _key(document) if document else None

    async def list(self, project_id: str) -> list[ApiKey]:
        found = self._collection.find({"project_id": project_id}).sort("created_at", 1)
        return [_key(d) async for d in found]

    async def revoke(self, project_id: str, key_id: str) -> bool:
        result = await self._collection.update_one(
            {"_id": key_id, "project_id": project_id, "revoked_at": None},
            {"$set": {"revoked_at": utc_now().isoformat()}},
        )
        if result.matched_count:
            return True
        return (
            await self._collection.find_one({"_id": key_id, "project_id": project_id}) is not None
        )


def _key(document: dict[str, Any]) -> ApiKey:
    data = {k: v for k, v in document.items() if k != "_id"}
    return ApiKey.model_validate({**data, "key_id": document["_id"]})
