"""Request limits: body size, JSON shape and a per-caller rate, as pure ASGI middleware.

They run outside FastAPI's exception handlers (a limit must hold before any route code reads the
body), so each answers its own problem document, shaped like ``problems.problem_response``.
``install_limits`` adds them in the order that rejects a request as cheaply as possible.

The rate limit charges who is really asking, not what a header spells: the id of a valid API key
(however the ``Authorization`` value is cased or spaced), else the client's address, so requests
with no key, a bogus, unknown or revoked one all draw on their address's bucket. The address is
the socket's peer; ``X-Forwarded-For`` counts only from the proxies ``trusted_proxies`` names
(uvicorn must be run with ``proxy_headers=False`` so it does not trust the header on its own).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from itertools import accumulate

import structlog
from starlette.applications import Starlette
from starlette.datastructures import URL, Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from services.gateway.problems import problem_at, unavailable_at
from shared.errors import is_transient

log = structlog.get_logger(__name__)

DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_JSON_STRING = 100_000
DEFAULT_RATE_PER_SECOND = 20.0
DEFAULT_BURST = 40
MAX_TRACKED_CLIENTS = 10_000
EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})
"""Probes must see the process, not a rate limit a busy client exhausted. (Prometheus scrapes
``/metrics`` on the separate health listener, which has no rate limit.)"""

Clock = Callable[[], float]


async def send_problem(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    slug: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
) -> None:
    response = problem_at(URL(scope=scope).path, status, slug, title, detail, headers)
    await response(scope, receive, send)


# --- body size and JSON shape -------------------------------------------------------------------


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


class BodyLimitMiddleware:
    """413 for a body over ``max_body_bytes``; 400 for JSON nested or with strings past the limits.

    The body is read here, never more than the cap, and replayed to the app: the gateway takes
    only JSON bodies, which FastAPI would buffer whole anyway.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        max_json_string: int = DEFAULT_MAX_JSON_STRING,
    ) -> None:
        if min(max_body_bytes, max_json_depth, max_json_string) < 1:
            raise ValueError("body and JSON limits must be positive")
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.max_json_string = max_json_string

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            declared = _content_length(headers)
            # Trusting a declared length over the cap costs nothing and reads nothing; a lying
            # smaller one is caught by counting below.
            if declared is not None and declared > self.max_body_bytes:
                raise _TooLarge
            body = await _read_capped(receive, self.max_body_bytes)
        except _TooLarge:
            await send_problem(
                scope,
                receive,
                send,
                413,
                "payload-too-large",
                "Payload too large",
                f"the request body is over the limit of {self.max_body_bytes} bytes",
            )
            return
        except _Disconnected:
            return  # nobody is left to answer
        if _is_json(headers.get("content-type")):
            broken = json_violation(
                body, max_depth=self.max_json_depth, max_string=self.max_json_string
            )
            if broken is not None:
                title, detail = {
                    "json-too-deep": (
                        "JSON too deep",
                        f"the JSON body nests deeper than {self.max_json_depth} levels",
                    ),
                    "json-string-too-long": (
                        "JSON string too long",
                        f"a JSON string or key is longer than {self.max_json_string} characters",
                    ),
                    "json-non-finite-number": (
                        "Not a JSON number",
                        "NaN, Infinity and -Infinity are not JSON numbers",
                    ),
                    "json-number-out-of-range": (
                        "JSON number out of range",
                        "a JSON number is out of range: integers must fit in 64 bits (signed) and"
                        " other numbers in a 64-bit float (1e400 would be read as infinity)",
                    ),
                    "json-unpaired-surrogate": (
                        "Unpaired surrogate in a JSON string",
                        "a JSON string escapes half of a UTF-16 surrogate pair (such as \\ud800"
                        " without the \\udc00-\\udfff that must follow it), which is no"
                        " character: send the character itself, or both halves of its pair",
                    ),
                }[broken]
                await send_problem(scope, receive, send, 400, broken, title, detail)
                return
        await self.app(scope, _replay(body, receive), send)


def _content_length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


async def _read_capped(receive: Receive, cap: int) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk: bytes = message.get("body", b"")
        # Checked before appending, so a flood never costs more than ``cap`` bytes of memory.
        if len(body) + len(chunk) > cap:
            raise _TooLarge
        body += chunk
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # After the body, the app may still wait for the client to disconnect.
        return await receive()

    return replayed


def _is_json(content_type: str | None) -> bool:
    # A body without a content type is scanned too: FastAPI parses it as JSON when a route
    # turns strict_content_type off, and scanning costs little.
    if not content_type:
        return True
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NESTING = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_violation(body: bytes, *, max_depth: int, max_string: int) -> str | None:
    """``json-too-deep``, ``json-string-too-long``, ``json-non-finite-number``,
    ``json-number-out-of-range`` or ``json-unpaired-surrogate`` when the JSON ``body`` breaks a
    limit or holds what no answer, store or log line could hold.

    Works in whole-buffer passes (replace, split, translate, accumulate, find) that run in C: no
    recursion to overflow on ``[[[[...``, and no Python step per byte, so a 1 MiB body costs
    about what parsing it does. Bytes that are not valid JSON give ``None``: the app rejects them.
    """
    text = _as_utf8(body)
    if text is None:
        return None
    # An escaped backslash or quote becomes one placeholder byte, so every quote left delimits a
    # string, and every string is at least as many bytes long as it has characters.
    flat = text.replace(b"\\\\", b"_").replace(b'\\"', b"_")
    pieces = flat.split(b'"')
    strings = pieces[1::2]
    if max(map(len, strings), default=0) > max_string and any(
        _characters(s) > max_string for s in strings if len(s) > max_string
    ):
        return "json-string-too-long"
    outside = b"".join(pieces[0::2])
    # Python's json (which FastAPI parses with) accepts NaN, Infinity and -Infinity, which no
    # JSON answer or stored document can hold (a 500 later); outside strings valid JSON never
    # spells either word.
    if b"NaN" in outside or b"Infinity" in outside:
        return "json-non-finite-number"
    if _out_of_range(outside):
        return "json-number-out-of-range"
    # Escaped backslashes are placeholders in ``flat``, so every ``\u`` left is an escape.
    if _UNPAIRED_SURROGATE.search(flat):
        return "json-unpaired-surrogate"
    brackets = outside.translate(None, _NOT_BRACKETS)
    depths = accumulate(map(_NESTING.__getitem__, brackets))
    if any(map(max_depth.__lt__, depths)):
        return "json-too-deep"
    return None


_HIGH = rb"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_UNPAIRED_SURROGATE = re.compile(rb"%s(?!%s)|(?<!%s)%s" % (_HIGH, _LOW, _HIGH, _LOW))
"""A high surrogate escape not followed by a low one, or a low one not preceded by a high one.
Python's json reads either as a lone surrogate, a ``str`` that UTF-8 cannot encode: it fails
the answer that echoes it and every store, so it is refused here, before any route holds it."""

_MAY_OVERFLOW = re.compile(rb"[eE][+-]?\d{3}|\d{19}")
"""What every number out of range has: an exponent of three digits or more, or 19 digits in a
row (a float past 1.8e308 with a shorter exponent has hundreds of them)."""
_NUMBER = re.compile(rb"(?<![\w.+-])-?\d+(\.\d+)?([eE][+-]?\d+)?")
_INT64 = range(-(2**63), 2**63)


def _out_of_range(outside: bytes) -> bool:
    """Is a number of the JSON text outside strings (``outside``) one that Python's json reads as
    infinity (``1e400``, ``-1e400``), or an integer that no store can hold (MongoDB's are 64-bit,
    and a longer one past 4,300 digits is refused by ``int()`` with a 500's ValueError)?

    Ordinary bodies cost one search that runs in C; only one with a suspect number is read
    number by number."""
    if _MAY_OVERFLOW.search(outside) is None:
        return False
    for number in _NUMBER.finditer(outside):
        text = number[0]
        if number[1] is None and number[2] is None:
            if len(text) > 20 or int(text) not in _INT64:
                return True
        elif math.isinf(float(text)):
            return True
    return False


def _as_utf8(body: bytes) -> bytes | None:
    # json.loads also reads UTF-16 and UTF-32; scanning those bytes as UTF-8 would miss quotes
    # and escapes, so a deep document could slip past in another encoding.
    encoding = json.detect_encoding(body)
    if encoding.startswith("utf-8"):
        return body
    try:
        return body.decode(encoding).encode()
    except UnicodeDecodeError:
        return None


def _characters(raw: bytes) -> int:
    try:
        decoded: str = json.loads(b'"' + raw + b'"')
    except ValueError:
        return 0  # not a valid JSON string: the app rejects the body
    return len(decoded)


# --- rate limit ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """One token bucket per client key; past ``max_keys`` the least recently seen is dropped.

    A dropped bucket was the idlest, and forgetting it only gives that client its burst back.
    No lock: ``take`` never awaits, so on one event loop it cannot interleave with itself.
    """

    def __init__(
        self,
        *,
        rate_per_second: float,
        burst: int,
        clock: Clock = time.monotonic,
        max_keys: int = MAX_TRACKED_CLIENTS,
    ) -> None:
        if rate_per_second <= 0 or burst < 1 or max_keys < 1:
            raise ValueError("rate_per_second must be > 0, burst and max_keys >= 1")
        self.rate = rate_per_second
        self.burst = burst
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def __contains__(self, key: object) -> bool:
        return key in self._buckets

    def take(self, key: str) -> float:
        """Spend one token of ``key``'s bucket: 0.0 if there was one, else seconds until one."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.max_keys:
                self._buckets.popitem(last=False)
            bucket = self._buckets[key] = _Bucket(tokens=float(self.burst), updated=now)
        else:
            self._buckets.move_to_end(key)
            # max(): a clock that steps back must not drain the bucket.
            elapsed = max(0.0, now - bucket.updated)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
            bucket.updated = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self.rate


Identify = Callable[[Scope], Awaitable[str | None]]
"""The id of the valid API key a request carries, or None (``auth.request_key_id``)."""


def client_address(scope: Scope) -> str:
    """The address a request comes from: the socket's peer, or the client a trusted proxy names
    (``ProxyHeadersMiddleware`` has rewritten ``scope["client"]`` by then). An IPv6 address
    counts as its /64, which one host usually holds whole."""
    client = scope.get("client")
    host: str = client[0] if client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class RateLimitMiddleware:
    """429 with ``Retry-After`` once a caller has spent its burst faster than the refill rate.

    The caller is ``key:<key id>`` for a valid key (``identify``), else ``ip:<address>``. Without
    ``identify`` every request is charged to its address.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        identify: Identify | None = None,
        rate_per_second: float = DEFAULT_RATE_PER_SECOND,
        burst: int = DEFAULT_BURST,
        clock: Clock = time.monotonic,
        max_keys: int = MAX_TRACKED_CLIENTS,
        exempt_paths: frozenset[str] = EXEMPT_PATHS,
    ) -> None:
        self.app = app
        self.identify = identify
        self.buckets = TokenBuckets(
            rate_per_second=rate_per_second, burst=burst, clock=clock, max_keys=max_keys
        )
        self.exempt_paths = exempt_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in self.exempt_paths:
            await self.app(scope, receive, send)
            return
        try:
            key_id = None if self.identify is None else await self.identify(scope)
        except Exception as exc:
            if not is_transient(exc):
                raise
            await unavailable_at(URL(scope=scope).path, exc)(scope, receive, send)
            return
        caller = f"key:{key_id}" if key_id is not None else f"ip:{client_address(scope)}"
        wait = self.buckets.take(caller)
        if wait > 0:
            retry_after = max(1, math.ceil(wait))
            await send_problem(
                scope,
                receive,
                send,
                429,
                "rate-limited",
                "Too many requests",
                f"over {self.buckets.rate:g} requests per second (burst {self.buckets.burst});"
                f" retry in {retry_after} s",
                headers={"Retry-After": str(retry_after)},
            )
            return
        await self.app(scope, receive, send)


def route_path(scope: Scope) -> str:
    # Behind a proxy prefix (``--root-path``) the ASGI path carries the prefix.
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root + "/") else path


def install_limits(
    app: Starlette,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    max_json_string: int = DEFAULT_MAX_JSON_STRING,
    rate_limit_per_second: float = DEFAULT_RATE_PER_SECOND,
    rate_limit_burst: int = DEFAULT_BURST,
    identify: Identify | None = None,
    trusted_proxies: list[str] | None = None,
    clock: Clock = time.monotonic,
) -> None:
    """Add the limits to ``app``; call it after any other ``add_middleware``.

    ``trusted_proxies`` (IPs and CIDRs): the peers whose ``X-Forwarded-For`` names the client;
    none by default, so a client cannot pick the address it is limited as.
    """
    # The middleware added last runs first: a client over its rate is turned away before a byte
    # of its body is read.
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=max_body_bytes,
        max_json_depth=max_json_depth,
        max_json_string=max_json_string,
    )
    app.add_middleware(
        RateLimitMiddleware,
        identify=identify,
        rate_per_second=rate_limit_per_second,
        burst=rate_limit_burst,
        clock=clock,
    )
    if trusted_proxies:
        # uvicorn's own, so the rule is the one its documentation describes: the client is the
        # right-most address of X-Forwarded-For that is not a trusted proxy.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=trusted_proxies)
