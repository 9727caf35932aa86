"""API keys: random secrets shown once, stored only as a hash, scoped to one project, with a role.

A secret looks like ``ilk_<key id>_<43 random url-safe characters>``. The key id in it finds the
record; the SHA-256 of the whole secret must match the stored hash (compared in constant time).
A high-entropy random secret needs no slow hash: there is nothing to guess. Revoking sets
``revoked_at``; a revoked key never authenticates again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

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


DECIDING_ROLES = (Role.OWNER,)
"""Who may decide a suspension, whichever channel the decision comes through: an API key at the
gateway's resume routes, a registered outside producer on the bus (shared/senders.py)."""
CANCELLING_ROLES = (Role.OWNER,)
"""Who may cancel an execution, through the cancel routes or on the bus."""


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
