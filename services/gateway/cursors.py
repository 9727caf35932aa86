"""Page cursors as the API hands them out: opaque, sealed, and bound to who asked for what.

The stores page with plain cursors (the sort key of the last item: a time and an execution or
delivery id). The API never shows those: it seals each one (shared/crypto.py, AES-GCM) together
with its *scope*, the route, the project, the key that asked, the workspaces that key may see
and the filters of the request. A cursor therefore tells its holder nothing, cannot be altered,
and opens only for the same key asking the same question: used by another key, on another
route, or with other filters, it is a 400 like any cursor the API did not return.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from shared.crypto import Keyring, Unsealable
from shared.store.api_keys import ApiKey
from shared.store.cursor import InvalidCursor

PURPOSE = "page-cursor"


class CursorRefused(InvalidCursor):
    """A cursor this API did not hand to this key for this request: the client's mistake.
    (The stores' own InvalidCursor is only ever about a cursor the API sealed, so a bug.)"""

    problem_type = "invalid-cursor"
    problem_title = "Invalid cursor"
    problem_status = 400


@dataclass(frozen=True)
class CursorScope:
    route: str
    project_id: str
    key_id: str
    key_workspaces: tuple[str, ...] | None
    """What the key may see (None: every workspace): a cursor never outlives a narrowed key."""
    query: tuple[tuple[str, str], ...]
    """The request's other parameters (workspace, status filter): the same question only."""

    @classmethod
    def of(cls, route: str, project_id: str, key: ApiKey, **query: str | None) -> CursorScope:
        workspaces = None if key.workspaces is None else tuple(sorted(key.workspaces))
        asked = tuple(sorted((name, value) for name, value in query.items() if value is not None))
        return cls(route, project_id, key.key_id, workspaces, asked)

    def context(self) -> str:
        return json.dumps(
            [self.route, self.project_id, self.key_id, self.key_workspaces, self.query],
            separators=(",", ":"),
        )


class PageCursors:
    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring

    def seal(self, inner: str | None, scope: CursorScope) -> str | None:
        """The API's cursor for a store's next-page cursor (None stays None: the last page)."""
        if inner is None:
            return None
        return self._keyring.seal(inner.encode(), purpose=PURPOSE, context=scope.context())

    def open(self, cursor: str | None, scope: CursorScope) -> str | None:
        """The store's cursor inside an API cursor; CursorRefused for anything else."""
        if cursor is None:
            return None
        try:
            return self._keyring.open(cursor, purpose=PURPOSE, context=scope.context()).decode()
        except (Unsealable, UnicodeDecodeError):
            raise CursorRefused(
                "cursor is not one this API returned to this key for this request"
                " (or it was issued before the encryption keys were rotated: start over)"
            ) from None
