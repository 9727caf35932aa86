"""Who is calling, and may they: API keys, project scope, roles.

Every API route depends on ``access(action, roles)``:

1. no key, a malformed, unknown or revoked one -> 401 with ``WWW-Authenticate: Bearer``
   (the key is read from ``Authorization: Bearer <key>``, else from ``X-API-Key``:
   ``presented_secret``);
2. a key of another project, or of a workspace it may not touch -> 404, the same answer as a
   missing execution, so a key learns nothing about what exists elsewhere;
3. a role that may not do this -> 403 naming the roles that may.

The scope check comes before the role check on purpose: a read-only key of project A asking to
resume something in project B is told "not found", not "forbidden".

A request's key is read from the store once: the rate limit (``limits.py``) needs it first, to
charge the key rather than whatever the ``Authorization`` header spells, and leaves the answer in
the request's ASGI state for ``access``. Outside development the well-known development key is
refused by its id (``GatewayKeys``), whatever the store holds.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers
from starlette.types import Scope

from services.gateway.problems import Problem
from shared.errors import is_transient
from shared.store.api_keys import DEVELOPMENT_KEY_ID, ApiKey, ApiKeys, Role, authenticate

IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

# Declares the scheme in the OpenAPI document; the header itself is read by ``presented_secret``,
# the one parser the rate limit and ``access`` share.
bearer = HTTPBearer(auto_error=False, description="An Interlock API key: `Bearer ilk_...`")

ANY_ROLE = (Role.OWNER, Role.MEMBER, Role.READ_ONLY)
WRITERS = (Role.OWNER, Role.MEMBER)
OWNERS = (Role.OWNER,)

_AUTHENTICATED = "interlock.authenticated"
"""Where a request's ASGI state keeps the outcome of reading its key."""


def bearer_secret(authorization: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` value: the scheme in any case, any
    whitespace around and between. None when there is no bearer credential."""
    if not authorization:
        return None
    parts = authorization.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1].strip() or None


API_KEY_HEADER = "x-api-key"
"""The other header a key may come in: the one LangGraph's client (``langgraph-sdk``) sends."""


def presented_secret(headers: Headers) -> str | None:
    """The key a request presents: ``Authorization: Bearer <key>``, else ``X-API-Key: <key>``.
    When both are sent the ``Authorization`` one counts, so adding the other header can never
    change which key a request is charged to or authorised as."""
    bearer = bearer_secret(headers.get("authorization"))
    if bearer is not None:
        return bearer
    return headers.get(API_KEY_HEADER, "").strip() or None


class GatewayKeys:
    """The key store as the gateway sees it: outside development the well-known development key
    (``make dev``'s, id ``DEVELOPMENT_KEY_ID``) does not exist, without a read, whatever the
    store holds (a store that once ran in development still has it)."""

    def __init__(self, keys: ApiKeys, *, environment: str) -> None:
        self._keys = keys
        self.development = environment == "development"

    async def add(self, key: ApiKey) -> None:
        await self._keys.add(key)

    async def get(self, key_id: str) -> ApiKey | None:
        if key_id == DEVELOPMENT_KEY_ID and not self.development:
            return None
        return await self._keys.get(key_id)

    async def list(self, project_id: str) -> list[ApiKey]:
        return await self._keys.list(project_id)

    async def revoke(self, project_id: str, key_id: str) -> bool:
        return await self._keys.revoke(project_id, key_id)


async def warn_if_development_key_present(keys: ApiKeys, *, environment: str) -> bool:
    """Log ``security.development_key_present`` when a gateway outside development starts on a
    store holding the development key unrevoked (it stays refused: ``GatewayKeys``)."""
    if environment == "development":
        return False
    # Once per start: a logger made here follows the logging configured by then (and a test's
    # capture), where a module-level one would be cached at its first use.
    log = structlog.get_logger(__name__)
    try:
        key = await keys.get(DEVELOPMENT_KEY_ID)
    except Exception as exc:
        if not is_transient(exc):
            raise
        # Only a warning is at stake (the key is refused either way): a database slow to answer
        # must not keep the gateway from starting.
        log.warning("security.development_key_unchecked", error=repr(exc))
        return False
    if key is None or key.revoked_at is not None:
        return False
    log.warning(
        "security.development_key_present",
        key_id=DEVELOPMENT_KEY_ID,
        project_id=key.project_id,
        environment=environment,
        detail="the store holds the well-known development key; this gateway refuses it."
        f" Revoke it: interlock keys revoke {DEVELOPMENT_KEY_ID} --project {key.project_id}",
    )
    return True


@dataclass(frozen=True, slots=True)
class _Authenticated:
    key: ApiKey | None


async def request_key(keys: ApiKeys, scope: Scope) -> ApiKey | None:
    """The valid key a request carries, or None. The first caller reads the store (one point
    read by key id); later callers for the same request get the same answer from its state."""
    state = scope.setdefault("state", {})
    cached = state.get(_AUTHENTICATED)
    if isinstance(cached, _Authenticated):
        return cached.key
    secret = presented_secret(Headers(scope=scope))
    key = None if secret is None else await authenticate(keys, secret)
    state[_AUTHENTICATED] = _Authenticated(key)
    return key


def request_key_id(keys: ApiKeys) -> Callable[[Scope], Awaitable[str | None]]:
    """For the rate limit: the id of the valid key a request carries, or None."""

    async def key_id(scope: Scope) -> str | None:
        key = await request_key(keys, scope)
        return None if key is None else key.key_id

    return key_id


def not_found(request: Request) -> Problem:
    execution_id = request.path_params.get("execution_id")
    if execution_id is not None:
        return Problem(
            404, "execution-not-found", "Execution not found", f"no execution {execution_id} here"
        )
    return Problem(404, "not-found", "Not found", "nothing here")


def access(keys: ApiKeys, action: str, roles: tuple[Role, ...]) -> Callable[..., Awaitable[ApiKey]]:
    async def dependency(
        request: Request,
        declared: HTTPAuthorizationCredentials | None = Depends(bearer),
    ) -> ApiKey:
        key = await request_key(keys, request.scope)
        if key is None:
            if presented_secret(request.headers) is None:
                raise _unauthenticated(
                    "send an API key: Authorization: Bearer <key> (or X-API-Key: <key>)"
                )
            raise _unauthenticated("the API key is not valid (unknown, malformed or revoked)")
        project_id = request.path_params.get("project_id", "")
        workspace_id = request.path_params.get("workspace_id") or request.query_params.get(
            "workspace_id"
        )
        # A malformed id is the caller's mistake whatever it names: say so (400) rather than
        # "not found"; well-formed ids of other projects get the 404 below.
        for name, value in (("project_id", project_id), ("workspace_id", workspace_id)):
            if value is not None and not IDENTIFIER.fullmatch(value):
                raise Problem(
                    400, "invalid-request", "Invalid request", f"{name}: not a valid identifier"
                )
        if not key.may_use(project_id, workspace_id):
            raise not_found(request)
        require_role(key, action, roles)
        return key

    return dependency


def require_role(key: ApiKey, action: str, roles: tuple[Role, ...]) -> None:
    """403 unless the key has one of ``roles``. ``access`` checks it for a route; a route that
    learns from its body what is asked (the LangGraph API's runs) checks it then."""
    if key.role not in roles:
        allowed = " or ".join(r.value for r in roles)
        raise Problem(
            403,
            "forbidden-role",
            "Role not allowed",
            f"{action} requires {allowed}; this key has {key.role.value}",
            required_roles=[r.value for r in roles],
        )


def _unauthenticated(detail: str) -> Problem:
    return Problem(
        401,
        "unauthenticated",
        "Authentication required",
        detail,
        headers={"WWW-Authenticate": 'Bearer realm="interlock"'},
    )


MAX_RECHECKED_KEYS = 10_000


class KeyRechecks:
    """Whether a key that authenticated a long request (an execution stream) still would.

    Each key is read at most once per ``interval`` in this process, however many streams of it
    are open: the first stream past the interval starts the read, the others wait for the same
    one. A failed read is forgotten, so the next check reads again.
    """

    def __init__(
        self,
        keys: ApiKeys,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_RECHECKED_KEYS,
    ) -> None:
        if interval <= 0 or max_keys < 1:
            raise ValueError("interval must be > 0 and max_keys >= 1")
        self.interval = interval
        self.max_keys = max_keys
        self._keys = keys
        self._clock = clock
        self._reads: OrderedDict[str, tuple[float, asyncio.Task[ApiKey | None]]] = OrderedDict()

    async def still_valid(self, key: ApiKey) -> bool:
        now = self._clock()
        entry = self._reads.get(key.key_id)
        if entry is None or now - entry[0] >= self.interval:
            read = asyncio.ensure_future(self._keys.get(key.key_id))
            # Retrieved here too, so a read whose waiters all left logs no "never retrieved".
            read.add_done_callback(lambda done: done.cancelled() or done.exception())
            entry = self._reads[key.key_id] = (now, read)
            self._reads.move_to_end(key.key_id)
            if len(self._reads) > self.max_keys:
                self._reads.popitem(last=False)
        try:
            # Shielded: a stream closing while it waits must not cancel the others' read.
            current = await asyncio.shield(entry[1])
        except Exception:
            if self._reads.get(key.key_id) is entry:
                del self._reads[key.key_id]
            raise
        return (
            current is not None
            and current.revoked_at is None
            and hmac.compare_digest(current.secret_hash, key.secret_hash)
        )
