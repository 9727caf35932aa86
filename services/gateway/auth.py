"""Who is calling, and may they: API keys, project scope, roles.

Every API route depends on ``access(action, roles)``:

1. no key, a malformed, unknown or revoked one -> 401 with ``WWW-Authenticate: Bearer``;
2. a key of another project, or of a workspace it may not touch -> 404, the same answer as a
   missing execution, so a key learns nothing about what exists elsewhere;
3. a role that may not do this -> 403 naming the roles that may.

The scope check comes before the role check on purpose: a read-only key of project A asking to
resume something in project B is told "not found", not "forbidden".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.gateway.problems import Problem
from shared.store.api_keys import ApiKey, ApiKeys, Role, authenticate

IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

bearer = HTTPBearer(auto_error=False, description="An Interlock API key: `Bearer ilk_...`")

ANY_ROLE = (Role.OWNER, Role.MEMBER, Role.READ_ONLY)
WRITERS = (Role.OWNER, Role.MEMBER)
OWNERS = (Role.OWNER,)


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
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
    ) -> ApiKey:
        if credentials is None:
            raise _unauthenticated("send an API key: Authorization: Bearer <key>")
        key = await authenticate(keys, credentials.credentials)
        if key is None:
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
        if key.role not in roles:
            allowed = " or ".join(r.value for r in roles)
            raise Problem(
                403,
                "forbidden-role",
                "Role not allowed",
                f"{action} requires {allowed}; this key has {key.role.value}",
                required_roles=[r.value for r in roles],
            )
        return key

    return dependency


def _unauthenticated(detail: str) -> Problem:
    return Problem(
        401,
        "unauthenticated",
        "Authentication required",
        detail,
        headers={"WWW-Authenticate": 'Bearer realm="interlock"'},
    )
