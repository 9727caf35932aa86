"""Body size, JSON shape and rate limits answer problem documents before the app does any work."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import Body, FastAPI, Request
from starlette.types import Message, Receive, Scope, Send

from services.gateway.limits import (
    BodyLimitMiddleware,
    RateLimitMiddleware,
    TokenBuckets,
    client_address,
    install_limits,
    json_violation,
)

MiB = 1 << 20


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def echo_app() -> FastAPI:
    app = FastAPI()
    app.state.calls = 0

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, Any]:
        app.state.calls += 1
        body = await request.body()
        return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}

    @app.post("/parsed")
    async def parsed(payload: Any = Body()) -> dict[str, str]:
        # FastAPI parsing the replayed body proves the app still receives it after the scan.
        return {"type": type(payload).__name__}

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> dict[str, str]:
        return {"status": "ready"}

    return app


def client(app: Any, ip: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(ip, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://gateway")


def limited(**limits: Any) -> FastAPI:
    app = echo_app()
    install_limits(app, **{"rate_limit_burst": 1000, **limits})
    return app


def assert_problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["type"] == f"https://interlock.dev/problems/{slug}"
    assert problem["status"] == status
    assert problem["title"]
    assert problem["detail"]
    assert problem["instance"] == response.request.url.path
    return problem


def http_scope(headers: list[tuple[bytes, bytes]]) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/echo",
        "raw_path": b"/echo",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"gateway"), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("gateway", 80),
    }


class Recorder:
    """The downstream app and the server's ``send`` of a raw ASGI call."""

    def __init__(self) -> None:
        self.called = False
        self.sent: list[Message] = []

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.called = True

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def problem(self) -> tuple[int, dict[str, Any]]:
        start, body = self.sent
        return start["status"], json.loads(body["body"])


# --- body size ----------------------------------------------------------------------------------


async def test_declared_length_over_cap_is_413_without_reading_the_body() -> None:
    recorder = Recorder()

    async def unreadable() -> Message:
        raise AssertionError("the body must not be read")

    middleware = BodyLimitMiddleware(recorder.app, max_body_bytes=1024)
    scope = http_scope([(b"content-type", b"application/json"), (b"content-length", b"1025")])
    await middleware(scope, unreadable, recorder.send)

    assert not recorder.called
    status, problem = recorder.problem()
    assert status == 413
    assert problem["type"] == "https://interlock.dev/problems/payload-too-large"
    assert "1024 bytes" in problem["detail"]
    assert problem["instance"] == "/echo"


async def test_a_lying_content_length_is_caught_by_counting_and_reading_stops_at_the_cap() -> None:
    recorder = Recorder()
    reads = 0

    async def endless() -> Message:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b"x" * 4096, "more_body": True}

    middleware = BodyLimitMiddleware(recorder.app, max_body_bytes=64 * 1024)
    scope = http_scope([(b"content-type", b"application/octet-stream"), (b"content-length", b"10")])
    await middleware(scope, endless, recorder.send)

    assert not recorder.called
    assert recorder.problem()[0] == 413
    assert reads == 64 // 4 + 1  # the chunk that crosses the cap is the last one read


async def test_content_length_over_cap_is_413_and_the_app_is_not_called() -> None:
    app = limited(max_body_bytes=1024)
    async with client(app) as http:
        response = await http.post("/echo", content=b"x" * 1025)
    problem = assert_problem(response, 413, "payload-too-large")
    assert "1024" in problem["detail"]
    assert app.state.calls == 0


async def test_chunked_body_over_cap_is_413() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 100

    app = limited(max_body_bytes=1024)
    async with client(app) as http:
        response = await http.post("/echo", content=chunks())
    assert "content-length" not in response.request.headers
    assert_problem(response, 413, "payload-too-large")
    assert app.state.calls == 0


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_body_at_the_cap_passes_through_intact(chunked: bool) -> None:
    body = bytes(range(256)) * (MiB // 256)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    async with client(limited()) as http:
        response = await http.post(
            "/echo",
            content=chunks() if chunked else body,
            headers={"content-type": "application/octet-stream"},
        )
    assert response.status_code == 200
    assert response.json() == {"length": MiB, "sha256": hashlib.sha256(body).hexdigest()}


# --- JSON shape ---------------------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def post_json(text: str | bytes, content_type: str = "application/json") -> httpx.Response:
    async with client(limited()) as http:
        return await http.post("/parsed", content=text, headers={"content-type": content_type})


async def test_depth_at_the_limit_passes_and_one_more_is_400() -> None:
    assert (await post_json(nested(32))).json() == {"type": "list"}
    problem = assert_problem(await post_json(nested(33)), 400, "json-too-deep")
    assert "32" in problem["detail"]


async def test_objects_count_towards_depth() -> None:
    deep = '{"a": ' * 33 + "1" + "}" * 33
    assert_problem(await post_json(deep), 400, "json-too-deep")
    assert (await post_json('{"a": ' * 32 + "1" + "}" * 32)).json() == {"type": "dict"}


async def test_an_unclosed_200k_bracket_body_is_400_not_500() -> None:
    assert_problem(await post_json("[" * 200_000), 400, "json-too-deep")


async def test_a_deep_body_in_utf16_is_still_caught() -> None:
    body = nested(33).encode("utf-16-le")
    assert_problem(await post_json(body), 400, "json-too-deep")


async def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps(["[" * 1000 + '\\"{' * 100, {"k": "]]]"}])
    assert (await post_json(text)).json() == {"type": "list"}


@pytest.mark.parametrize(
    "document",
    [{"k": "x" * 100_001}, {"x" * 100_001: 1}, ["ok", ["x" * 100_001]]],
    ids=["value", "key", "nested-value"],
)
async def test_a_string_over_the_limit_is_400(document: Any) -> None:
    problem = assert_problem(await post_json(json.dumps(document)), 400, "json-string-too-long")
    assert "100000" in problem["detail"]


async def test_strings_are_measured_in_characters_not_bytes() -> None:
    at_limit = {"x" * 100_000: "y" * 100_000}
    assert (await post_json(json.dumps(at_limit))).status_code == 200
    # Escapes and multi-byte UTF-8 make the raw text longer than the characters it decodes to.
    escaped = json.dumps({"k": '"' * 50_000 + "\\" * 50_000})
    assert (await post_json(escaped)).status_code == 200
    accented = json.dumps({"k": "é" * 60_000}, ensure_ascii=False)
    assert (await post_json(accented)).status_code == 200
    over = json.dumps({"k": "é" * 100_001})  # \u00e9 escapes: 6 bytes a character
    assert_problem(await post_json(over), 400, "json-string-too-long")


async def test_invalid_json_passes_through_to_the_app() -> None:
    app = limited()
    async with client(app) as http:
        response = await http.post(
            "/echo", content=b'{"a": [1, 2', headers={"content-type": "application/json"}
        )
    assert response.json()["length"] == 11
    assert app.state.calls == 1


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream"])
async def test_other_content_types_are_not_scanned(content_type: str) -> None:
    app = limited()
    async with client(app) as http:
        response = await http.post(
            "/echo", content=nested(1000), headers={"content-type": content_type}
        )
    assert response.json()["length"] == 2000


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "application/problem+json", "APPLICATION/JSON", None],
)
async def test_json_media_types_and_a_missing_type_are_scanned(content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    async with client(limited()) as http:
        response = await http.post("/echo", content=nested(33), headers=headers)
    assert_problem(response, 400, "json-too-deep")


@pytest.mark.parametrize(
    "text",
    [
        '{"decision": "approve", "generation": NaN}',
        '{"generation": Infinity}',
        '{"generation": -Infinity}',
        '[1, [2, {"a": [NaN]}]]',
        "NaN",
        '{"s": "a \\"quoted\\" NaN", "n": Infinity}',
    ],
)
async def test_nan_and_infinities_are_400_wherever_they_are(text: str) -> None:
    problem = assert_problem(await post_json(text), 400, "json-non-finite-number")
    assert "NaN" in problem["detail"]


async def test_the_words_inside_strings_and_exponents_are_fine() -> None:
    text = json.dumps({"NaN": "Infinity", "x": "-Infinity NaN", "n": 1e300, "m": -2.5e-3})
    assert (await post_json(text)).json() == {"type": "dict"}
    assert (await post_json("[1E5, 2e-1, true, false, null]")).json() == {"type": "list"}


def test_json_violation_is_linear_and_does_not_recurse() -> None:
    deep = ("[" * (MiB // 2) + "]" * (MiB // 2)).encode()
    assert json_violation(deep, max_depth=32, max_string=100_000) == "json-too-deep"
    wide = ("[" + "[]," * (MiB // 3 - 1) + "[]]").encode()
    assert json_violation(wide, max_depth=32, max_string=100_000) is None
    assert json_violation(b"", max_depth=32, max_string=100_000) is None


# --- rate limit ---------------------------------------------------------------------------------


def rate_limited(clock: FakeClock, *, rate: float = 1.0, burst: int = 3) -> RateLimitMiddleware:
    return RateLimitMiddleware(echo_app(), rate_per_second=rate, burst=burst, clock=clock)


async def test_burst_then_429_with_retry_after_then_refill() -> None:
    clock = FakeClock()
    auth = {"authorization": "Bearer key-a"}
    async with client(rate_limited(clock)) as http:
        for _ in range(3):
            assert (await http.get("/ping", headers=auth)).status_code == 200
        response = await http.get("/ping", headers=auth)
        assert_problem(response, 429, "rate-limited")
        assert response.headers["retry-after"] == "1"

        clock.advance(1.0)
        assert (await http.get("/ping", headers=auth)).status_code == 200
        assert (await http.get("/ping", headers=auth)).status_code == 429


async def test_retry_after_is_whole_seconds_until_the_next_token() -> None:
    clock = FakeClock()
    async with client(rate_limited(clock, rate=0.25, burst=1)) as http:
        assert (await http.get("/ping")).status_code == 200
        assert (await http.get("/ping")).headers["retry-after"] == "4"
        clock.advance(2.5)  # 0.625 tokens: 1.5 s to go
        assert (await http.get("/ping")).headers["retry-after"] == "2"
        clock.advance(0.75)  # 0.8125 tokens: 0.75 s to go, never "0"
        assert (await http.get("/ping")).headers["retry-after"] == "1"
        clock.advance(0.75)
        assert (await http.get("/ping")).status_code == 200


async def test_separate_addresses_have_separate_buckets_and_bogus_keys_count_on_theirs() -> None:
    clock = FakeClock()
    app = rate_limited(clock, burst=1)
    async with client(app, ip="10.0.0.1") as first, client(app, ip="10.0.0.2") as second:
        assert (await first.get("/ping")).status_code == 200
        assert (await first.get("/ping")).status_code == 429
        assert (await second.get("/ping")).status_code == 200
        # A credential that is not a valid key buys no bucket of its own: the address pays.
        for token in ("a", "b"):
            response = await first.get("/ping", headers={"authorization": f"Bearer {token}"})
            assert response.status_code == 429


def keyed(clock: FakeClock, valid: dict[str, str], *, burst: int = 2) -> RateLimitMiddleware:
    """A rate limit whose ``identify`` knows the ``valid`` secrets (secret -> key id)."""

    async def identify(scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                return valid.get(value.decode().split()[-1])
        return None

    return RateLimitMiddleware(
        echo_app(), identify=identify, rate_per_second=1.0, burst=burst, clock=clock
    )


async def test_a_valid_key_is_charged_to_its_id_not_to_the_address() -> None:
    clock = FakeClock()
    app = keyed(clock, {"s1": "k1", "s1-again": "k1", "s2": "k2"})
    async with client(app, ip="10.0.0.1") as one, client(app, ip="10.0.0.2") as other:
        assert (await one.get("/ping", headers={"authorization": "Bearer s1"})).status_code == 200
        # The same key id from another address, under another secret spelling: one bucket.
        again = {"authorization": "Bearer s1-again"}
        assert (await other.get("/ping", headers=again)).status_code == 200
        limited = await one.get("/ping", headers={"authorization": "Bearer s1"})
        assert_problem(limited, 429, "rate-limited")
        assert limited.headers["retry-after"] == "1"
        # Another key, and the address itself, still have their own.
        assert (await one.get("/ping", headers={"authorization": "Bearer s2"})).status_code == 200
        assert (await one.get("/ping")).status_code == 200


async def test_a_store_failure_while_reading_the_key_is_503_with_retry_after() -> None:
    from pymongo.errors import ServerSelectionTimeoutError

    async def down(scope: Scope) -> str | None:
        raise ServerSelectionTimeoutError("no primary")

    app = RateLimitMiddleware(echo_app(), identify=down, clock=FakeClock())
    async with client(app) as http:
        response = await http.get("/ping", headers={"authorization": "Bearer s1"})
        assert_problem(response, 503, "service-unavailable")
        assert int(response.headers["retry-after"]) >= 1
        assert (await http.get("/healthz")).status_code == 200  # probes never read a key


async def test_health_endpoints_are_exempt() -> None:
    clock = FakeClock()
    async with client(rate_limited(clock, burst=1)) as http:
        assert (await http.get("/ping")).status_code == 200
        assert (await http.get("/ping")).status_code == 429
        for _ in range(10):
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).status_code == 200


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("testclient", "testclient"),
    ],
)
def test_the_client_address_is_the_peer_and_ipv6_counts_by_its_64(peer: str, address: str) -> None:
    scope = {**http_scope([]), "client": (peer, 1234)}
    assert client_address(scope) == address
    assert client_address({**http_scope([]), "client": None}) == "unknown"


def test_buckets_are_bounded_and_the_least_recently_seen_is_evicted() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(rate_per_second=1.0, burst=1, clock=clock, max_keys=2)
    assert buckets.take("a") == 0.0
    assert buckets.take("b") == 0.0
    assert buckets.take("a") > 0  # a is now the most recently seen
    assert buckets.take("c") == 0.0
    assert len(buckets) == 2
    assert "b" not in buckets
    assert "a" in buckets


async def test_install_limits_checks_the_rate_before_reading_the_body() -> None:
    clock = FakeClock()
    app = echo_app()
    install_limits(app, max_body_bytes=1024, rate_limit_burst=1, clock=clock)
    async with client(app) as http:
        assert (await http.post("/echo", content=b"{}")).status_code == 200
        assert_problem(await http.post("/echo", content=b"x" * 5000), 429, "rate-limited")
        clock.advance(1.0)
        assert_problem(await http.post("/echo", content=b"x" * 5000), 413, "payload-too-large")
        clock.advance(1.0)
        assert_problem(await http.post("/echo", content=nested(40)), 400, "json-too-deep")
    assert app.state.calls == 1


@pytest.mark.parametrize(
    "limits",
    [{"max_body_bytes": 0}, {"max_json_depth": 0}, {"max_json_string": 0}],
)
def test_nonsense_body_limits_are_refused(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive"):
        BodyLimitMiddleware(echo_app(), **limits)


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (1.0, 0)])
def test_nonsense_rates_are_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate_per_second"):
        TokenBuckets(rate_per_second=rate, burst=burst)
