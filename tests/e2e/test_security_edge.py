"""The gateway's edge attacked as issue 17 found it open, against gateway processes on the real
cluster (Kafka, FerretDB): floods that dodged the rate limit, a revoked key's stream that kept
talking, too many streams, the development key in production, NaN, a public /metrics, /docs
from a CDN without frame protection, and cancel's 403 that spoke of resume.

Each flood comes from a loopback address of its own (127.0.0.N), so the attackers are told
apart by the address the gateway sees, as distinct hosts would be."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, aconnect_sse

from shared.crypto import new_key_entry
from tests.e2e.cluster import REPO, Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE, Api
from tests.eventually import eventually
from tests.ports import free_port

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"
DEV_SECRET = "ilk_00000000000000de_development-key-not-for-production-use-000"
AGENTS = f"/api/v1/projects/{PROJECT}/agents"


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = dict(response.json())
    assert body["type"].endswith("/" + slug), body
    return body


@dataclass
class Gateway:
    url: str
    health_url: str | None
    log: Path

    def client(self, source: str = "127.0.0.1", **kwargs: Any) -> httpx.AsyncClient:
        """A client connecting from loopback address ``source`` (one attacker per address)."""
        transport = httpx.AsyncHTTPTransport(local_address=source)
        return httpx.AsyncClient(base_url=self.url, transport=transport, timeout=20, **kwargs)


@asynccontextmanager
async def gateway_process(cluster: Cluster, name: str, **settings: str) -> AsyncIterator[Gateway]:
    """Another gateway process on the cluster's Kafka and database, with ``settings`` (INTERLOCK_*
    variables) over the cluster's, logging to ``<name>.log`` in the cluster's folder."""
    port = free_port()
    health = settings.get("INTERLOCK_HEALTH_PORT")
    env = {**cluster.env, "INTERLOCK_PORT": str(port), **settings}
    log = cluster.workdir / f"{name}.log"
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "interlock.cli",
            "service",
            "gateway",
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    async def ready() -> bool:
        if process.returncode is not None:
            raise AssertionError(f"{name} exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            async with httpx.AsyncClient() as client:
                return (await client.get(f"{url}/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await eventually(ready, bool, timeout=60, what=f"the gateway {name}")
        yield Gateway(url, f"http://127.0.0.1:{health}" if health else None, log)
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), timeout=20)


@pytest.fixture(scope="module")
async def strict(cluster: Cluster) -> AsyncIterator[Gateway]:
    """A gateway with a small rate limit (1/s, burst 5), two streams per key, and its metrics
    on a listener of its own."""
    async with gateway_process(
        cluster,
        "gateway-strict",
        INTERLOCK_RATE_LIMIT_PER_SECOND="1",
        INTERLOCK_RATE_LIMIT_BURST="5",
        INTERLOCK_STREAM_MAX_PER_KEY="2",
        INTERLOCK_HEALTH_PORT=str(free_port()),
    ) as gateway:
        yield gateway


def bogus_key() -> str:
    return f"ilk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}"


# --- finding 2: rate limits that hold -----------------------------------------------------------


async def test_a_key_with_its_scheme_case_and_spacing_varied_is_still_one_bucket(
    cluster: Cluster, strict: Gateway
) -> None:
    secret = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
    spellings = ["Bearer {}", "bEaReR  {}", "BEARER\t{}", "bearer   {}", "BeArEr {}"]
    async with strict.client("127.0.0.2") as client:
        codes = [
            (
                await client.get(
                    AGENTS,
                    params={"workspace_id": WORKSPACE},
                    headers={"Authorization": spellings[i % len(spellings)].format(secret)},
                )
            ).status_code
            for i in range(12)
        ]
        assert codes[:5] == [200] * 5 and 429 in codes[5:], codes
        limited = await client.get(
            AGENTS,
            params={"workspace_id": WORKSPACE},
            headers={"Authorization": f"bearer    {secret}"},
        )
        problem(limited, 429, "rate-limited")
        assert int(limited.headers["retry-after"]) >= 1


async def test_a_flood_of_bogus_keys_is_429(cluster: Cluster, strict: Gateway) -> None:
    async with strict.client("127.0.0.3") as client:
        codes = [
            (
                await client.get(
                    AGENTS,
                    params={"workspace_id": WORKSPACE},
                    headers={"Authorization": f"Bearer {bogus_key()}"},
                )
            ).status_code
            for _ in range(12)
        ]
        assert codes[:5] == [401] * 5 and 429 in codes[5:], codes
        limited = await client.get(
            AGENTS, params={"workspace_id": WORKSPACE}, headers={"Authorization": "Bearer nope"}
        )
        problem(limited, 429, "rate-limited")
        assert int(limited.headers["retry-after"]) >= 1
        # The flooding address's bucket is empty; a valid key sent from it has its own.
        good = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
        allowed = await client.get(
            AGENTS, params={"workspace_id": WORKSPACE}, headers={"Authorization": f"Bearer {good}"}
        )
        assert allowed.status_code == 200, allowed.text


async def test_a_new_forwarded_for_on_every_request_without_a_key_is_429(
    strict: Gateway,
) -> None:
    async with strict.client("127.0.0.4") as client:
        codes = [
            (
                await client.get(
                    AGENTS,
                    params={"workspace_id": WORKSPACE},
                    headers={"X-Forwarded-For": f"198.51.100.{i}", "X-Real-IP": f"192.0.2.{i}"},
                )
            ).status_code
            for i in range(12)
        ]
    assert codes[:5] == [401] * 5 and 429 in codes[5:], codes


# --- findings 3 and 7: streams ------------------------------------------------------------------


async def test_a_revoked_keys_open_stream_closes_within_seconds(api: Api, cluster: Cluster) -> None:
    """The cluster's gateway has the default re-check interval (5 s)."""
    execution_id = (await api.start_suspended())["execution_id"]
    secret = await cluster.key(PROJECT)
    url = f"/api/v1/projects/{PROJECT}/executions/{execution_id}/stream"
    params = {"workspace_id": WORKSPACE}
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx.AsyncClient(base_url=cluster.base_url, timeout=60, headers=headers) as client,
        aconnect_sse(client, "GET", url, params=params) as source,
    ):
        events = source.aiter_sse()
        seen = []
        async for event in events:
            seen.append(event)
            if event.event == "interrupt":
                break
        revoked = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "interlock.cli",
                "keys",
                "revoke",
                secret.split("_")[1],
                "--project",
                PROJECT,
            ],
            env=cluster.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert revoked.returncode == 0, revoked.stderr
        # A suspended execution's stream stays open for its 15 minutes; the revocation ends it
        # within the re-check interval (the bound below only keeps a failure from hanging).
        async with asyncio.timeout(30):
            after = [event async for event in events if event.data]
        assert after == []
        again = await client.get(url, params=params, headers={"Last-Event-ID": seen[-1].id})
        problem(again, 401, "unauthenticated")


async def test_streams_past_the_per_key_cap_are_429(
    api: Api, cluster: Cluster, strict: Gateway
) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    secret = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
    url = f"/api/v1/projects/{PROJECT}/executions/{execution_id}/stream"
    params = {"workspace_id": WORKSPACE}
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        strict.client("127.0.0.5", headers=headers) as client,
        aconnect_sse(client, "GET", url, params=params) as one,
        aconnect_sse(client, "GET", url, params=params) as two,
    ):
        assert (one.response.status_code, two.response.status_code) == (200, 200)
        streams = [one.aiter_sse(), two.aiter_sse()]
        for events in streams:  # both are open and delivering
            first = [event async for event in _until_data(events)]
            assert first[-1].event in ("status", "update"), first
        third = await client.get(url, params=params)
        problem(third, 429, "too-many-streams")
        assert int(third.headers["retry-after"]) >= 1


async def _until_data(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """The events up to the first one with data (the stream opens with a retry-only one)."""
    async for event in events:
        yield event
        if event.data:
            return


# --- finding 4: the development key -------------------------------------------------------------


async def test_the_development_key_is_refused_in_production_on_a_store_that_holds_it(
    cluster: Cluster,
) -> None:
    from shared.store.api_keys import Role, create_key
    from shared.store.mongo import MongoStore

    store = MongoStore.connect(cluster.env["INTERLOCK_MONGODB_URI"], cluster.database)
    try:  # as if this database had once run `make dev`
        await create_key(
            store.api_keys,
            project_id="demo",
            role=Role.OWNER,
            name="development",
            secret=DEV_SECRET,
        )
    finally:
        await store.close()
    headers = {"Authorization": f"Bearer {DEV_SECRET}"}
    params = {"workspace_id": "default"}
    async with gateway_process(
        cluster,
        "gateway-production",
        INTERLOCK_ENVIRONMENT="production",
        # Production refuses to start without keys; the cluster's own when it has them.
        INTERLOCK_ENCRYPTION_KEYS=cluster.env.get("INTERLOCK_ENCRYPTION_KEYS") or new_key_entry(),
    ) as production:
        async with production.client(headers=headers) as client:
            refused = await client.get("/api/v1/projects/demo/agents", params=params)
            problem(refused, 401, "unauthenticated")
            assert refused.headers["www-authenticate"].startswith("Bearer")
        warnings = [
            json.loads(line)
            for line in production.log.read_text().splitlines()
            if "security.development_key_present" in line
        ]
        assert warnings and warnings[0]["level"] == "warning", warnings
        assert warnings[0]["key_id"] == "00000000000000de"
    # The cluster's own gateway runs in "test": refused there too.
    async with httpx.AsyncClient(base_url=cluster.base_url, headers=headers) as client:
        problem(
            await client.get("/api/v1/projects/demo/agents", params=params), 401, "unauthenticated"
        )


# --- finding 7: the smaller ones ----------------------------------------------------------------


async def test_nan_in_a_resume_body_is_a_400_problem(api: Api) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    for number in ("NaN", "Infinity", "-Infinity"):
        response = await api.resume(
            execution_id, content=f'{{"decision": "approve", "generation": {number}}}'.encode()
        )
        problem(response, 400, "json-non-finite-number")
    assert (await api.status_of(execution_id))["status"] == "suspended"


async def test_metrics_are_not_on_the_public_port_but_on_the_separate_listener(
    cluster: Cluster, strict: Gateway
) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        for public in (cluster.base_url, strict.url):
            problem(await client.get(f"{public}/metrics"), 404, "not-found")
        assert strict.health_url is not None
        scraped = await client.get(f"{strict.health_url}/metrics")
        assert scraped.status_code == 200
        assert "interlock_http_requests_total" in scraped.text
        assert (await client.get(f"{strict.health_url}/readyz")).json() == {"status": "ready"}


async def test_docs_have_the_security_headers_and_load_nothing_from_elsewhere(
    cluster: Cluster,
) -> None:
    async with httpx.AsyncClient(base_url=cluster.base_url, timeout=10) as client:
        page = await client.get("/docs")
        assert page.status_code == 200
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
        assert re.search(r"script-src 'self' 'sha256-[A-Za-z0-9+/=]+'(;|$)", policy), policy
        # No script, style or icon from another origin, and no URL of another origin at all.
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/docs/static/") for s in sources), sources
        assert "://" not in page.text.replace("http://www.w3.org", "")
        bundle = await client.get("/docs/static/swagger-ui-bundle.js")
        assert bundle.status_code == 200 and "SwaggerUIBundle" in bundle.text
        assert (await client.get("/redoc")).status_code == 404


async def test_cancels_403_names_cancel(api: Api, cluster: Cluster) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    member = await cluster.key(PROJECT, "PROJECT_MEMBER")
    async with httpx.AsyncClient(
        base_url=cluster.base_url, headers={"Authorization": f"Bearer {member}"}, timeout=20
    ) as client:
        response = await client.post(
            f"/api/v1/projects/{PROJECT}/executions/{execution_id}/cancel",
            params={"workspace_id": WORKSPACE},
        )
    body = problem(response, 403, "forbidden-role")
    assert "cancel requires PROJECT_OWNER" in body["detail"]
    assert "resume" not in body["detail"]
    assert (await api.status_of(execution_id))["status"] == "suspended"
