"""Callers' custom headers (``X-Interlock-Custom-*``): what the gateway accepts, how they cross
the bus sealed, and how the sandbox opens them for the agent.

They are meant for secrets (an end user's token for the APIs an agent calls), and the bus keeps
what it carries: Kafka for the topic's retention, the in-process bus until every consumer group
has committed. So a set of custom headers never travels in plain text from the gateway:

- the gateway takes at most ``MAX_COUNT`` of them, each value at most ``MAX_VALUE_BYTES``,
  ``MAX_TOTAL_BYTES`` in all (``within_limits``: a 400 beyond);
- its publisher (``SealingPublisher``) replaces them by one header, ``SEALED_HEADER``: the whole
  set as JSON, sealed by the keyring (``shared/crypto.py``) for ``PURPOSE`` with the execution
  id as context, so a token copied onto another execution's message does not open;
- the orchestrator forwards what the message carries (``carried``) on its dispatch, unopened:
  it holds no key;
- the sandbox opens it (``open_carried``) and hands the agent the plain set as
  ``configurable["custom_headers"]``. A set that does not open (sealed by another process's
  in-memory key before a restart, by a key rotated out, or altered) is left out: the run goes on
  without it and the reason goes to the execution's audit trail.

An outside producer on the topic interface may still send plain ``x-interlock-custom-*`` Kafka
headers (it put them on its broker itself); they are passed through as before, plain. One
holding the keyring can send ``SEALED_HEADER`` instead, made as ``seal`` makes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from shared.crypto import Keyring, Unsealable
from shared.errors import InterlockError

if TYPE_CHECKING:
    from shared.bus import EventPublisher

CUSTOM_HEADER_PREFIX = "x-interlock-custom-"
SEALED_HEADER = "interlock-sealed-headers"
PURPOSE = "custom-headers"

MAX_COUNT = 32
MAX_VALUE_BYTES = 4 * 1024
MAX_TOTAL_BYTES = 8 * 1024
"""Names and values together. The server does not bound this reliably: uvicorn's HTTP/1.1
parser (h11) refuses a request head over 16 KiB only while it is still incomplete (a plain-text
400 before the app), and a head that arrives in one read passes at any size. Half of those
16 KiB, so a request within the limit leaves room for its other headers however it arrives."""


class CustomHeadersRejected(InterlockError):
    """Custom headers over a limit: the request is refused (400), nothing is published."""

    problem_type = "custom-headers-too-large"
    problem_title = "Custom headers over the limit"
    problem_status = 400

    def problem_extensions(self) -> dict[str, Any]:
        return {
            "limits": {
                "count": MAX_COUNT,
                "value_bytes": MAX_VALUE_BYTES,
                "total_bytes": MAX_TOTAL_BYTES,
            }
        }


def is_custom(name: str) -> bool:
    return name.lower().startswith(CUSTOM_HEADER_PREFIX)


def pick_custom_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    return {name.lower(): str(value) for name, value in headers.items() if is_custom(name)}


def within_limits(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The custom headers among a request's ``(name, value)`` pairs (every occurrence, as
    received: a name repeated counts each time; the last value wins), or CustomHeadersRejected.

    Values arrive decoded as Latin-1 (one character per byte), so lengths are byte counts."""
    picked: dict[str, str] = {}
    count = total = 0
    for name, value in items:
        if not is_custom(name):
            continue
        count += 1
        total += len(name) + len(value)
        if count > MAX_COUNT:
            raise CustomHeadersRejected(f"more than {MAX_COUNT} X-Interlock-Custom-* headers")
        if len(value) > MAX_VALUE_BYTES:
            raise CustomHeadersRejected(
                f"{name}: {len(value)} bytes; a custom header value may have {MAX_VALUE_BYTES}"
            )
        if total > MAX_TOTAL_BYTES:
            raise CustomHeadersRejected(
                f"X-Interlock-Custom-* headers over {MAX_TOTAL_BYTES} bytes in all"
                " (names and values)"
            )
        picked[name.lower()] = value
    return picked


def seal(headers: Mapping[str, str], keyring: Keyring, execution_id: str) -> dict[str, str]:
    """``headers`` with its custom ones replaced by one ``SEALED_HEADER`` (none when it has
    none); the others are left as they are."""
    custom = pick_custom_headers(headers)
    rest = {n: v for n, v in headers.items() if not is_custom(n) and n.lower() != SEALED_HEADER}
    if not custom:
        return rest
    plaintext = json.dumps(custom, sort_keys=True, separators=(",", ":")).encode()
    return {**rest, SEALED_HEADER: keyring.seal(plaintext, purpose=PURPOSE, context=execution_id)}


def carried(headers: Mapping[str, Any]) -> dict[str, str]:
    """What rides along with one run segment: the sealed set, and plain custom headers from an
    outside producer."""
    picked = pick_custom_headers(headers)
    for name, value in headers.items():
        if name.lower() == SEALED_HEADER:
            picked[SEALED_HEADER] = str(value)
    return picked


@dataclass(frozen=True)
class Opened:
    headers: dict[str, str] = field(default_factory=dict)
    """What the agent gets as ``configurable["custom_headers"]``."""
    unreadable: str | None = None
    """Why a sealed set was left out (never a value), for the audit trail; None if none was."""


def open_carried(headers: Mapping[str, str], keyring: Keyring, execution_id: str) -> Opened:
    """The plain custom headers of a run segment: plain ones passed through, the sealed set
    opened (it wins a name both carry). A sealed set that does not open is left out, saying why."""
    plain = pick_custom_headers(headers)
    token = headers.get(SEALED_HEADER)
    if token is None:
        return Opened(plain)
    try:
        opened = json.loads(keyring.open(token, purpose=PURPOSE, context=execution_id))
    except Unsealable as exc:
        return Opened(plain, f"the sealed custom headers do not open: {exc}")
    except ValueError:  # opened, so sealed by a holder of the key, but not JSON
        return Opened(plain, "the sealed custom headers are not a set of headers")
    if not isinstance(opened, dict) or not all(
        isinstance(v, str) and is_custom(n) for n, v in opened.items()
    ):
        return Opened(plain, "the sealed custom headers are not a set of headers")
    return Opened({**plain, **{n.lower(): v for n, v in opened.items()}})


class SealingPublisher:
    """The gateway's publisher: seals a message's custom headers before the bus sees them.

    Sealing here rather than in the route: the execution id (the seal's context) of an invoke
    without an idempotency key is chosen inside ``Intake``, after the route has run."""

    def __init__(self, inner: EventPublisher, keyring: Keyring) -> None:
        self._inner = inner
        self._keyring = keyring

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        if headers:
            execution_id = getattr(event, "execution_id", None)
            if not isinstance(execution_id, str):
                raise TypeError("custom headers travel only on an execution's events")
            headers = seal(headers, self._keyring, execution_id)
        await self._inner.publish(event, topic, key=key, headers=headers)
