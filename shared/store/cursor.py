"""Opaque page cursors: (created_at, execution_id) of the last item of a page."""

from __future__ import annotations

import base64
import json

from shared.errors import InterlockError


class InvalidCursor(InterlockError):
    pass


def encode_cursor(created_key: str, execution_id: str) -> str:
    raw = json.dumps([created_key, execution_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_key, execution_id = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, TypeError) as exc:
        raise InvalidCursor("cursor is not one this API returned") from exc
    if not isinstance(created_key, str) or not isinstance(execution_id, str):
        raise InvalidCursor("cursor is not one this API returned")
    return created_key, execution_id
