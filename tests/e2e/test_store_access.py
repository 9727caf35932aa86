"""Every MongoDB command each Interlock process sends is one its declared role allows
(shared/store/access.py, rendered into the deployment's MongoDB roles).

FerretDB, the MongoDB-compatible server the tests run on, implements no roles, so the roles
cannot refuse anything here. Instead the four services run as separate processes, configured as
the manifests configure them (``INTERLOCK_STORE_INIT_AT_START=false``: only ``interlock store
init`` creates indexes and migrates, as the migrator), through the main flows: suspend, decide
through the API, through an emailed link and by two owners, cancel, the notifier's deliveries
(one delivered, one failing), the gateway's reads (executions, lists, audit, pending reviews,
notifications, the stream, LangGraph threads) and the orchestrator's sweeps. Then every
process's ``interlock_store_command_seconds{command,collection}`` is scraped from its
``/metrics``, and each (command, collection) it counted is mapped to the privilege actions
MongoDB requires for it (``REQUIRED``) and checked against that service's grants. ``interlock
store init`` and ``interlock keys`` run in this process, and are checked the same way from its
own counts.

The metric does not say whether an update was an upsert (which MongoDB checks as ``insert``
too): the declaration grants ``insert`` wherever the code upserts, which a reading of the code,
not this test, establishes.

A session cluster would not do: its services create the indexes at their own start-up (their
counts would hold the migrator's commands), and a role missing what a service does only at
start-up (publishing its agents' versions, say) would go unnoticed in a window opened later.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY, generate_latest
from pymongo import AsyncMongoClient
from typer.testing import CliRunner

from bench.commands import Counts, diff, parse, scrape
from interlock.cli import app as cli
from services.notifier.channels.webhook import new_secret
from shared.domain.threads import turn_execution_id
from shared.store.access import (
    CREATE_INDEX,
    FIND,
    INSERT,
    PRINCIPALS,
    REMOVE,
    UPDATE,
)
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.e2e.mailbox import Mailbox, smtp_server
from tests.eventually import eventually
from tests.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

PROJECT = "proj-access"
WORKSPACE = "ws-access"
LINK_SECRET = "e2e-access-link-secret-0123456789"
REQUESTER = "requester@example.test"

REQUIRED: dict[str, frozenset[str]] = {
    "find": frozenset({FIND}),
    "getMore": frozenset({FIND}),
    "aggregate": frozenset({FIND}),
    "count": frozenset({FIND}),
    "distinct": frozenset({FIND}),
    "insert": frozenset({INSERT}),
    "update": frozenset({UPDATE}),
    # The query part needs find (MongoDB's privilege actions, "find").
    "findAndModify": frozenset({FIND, UPDATE}),
    "delete": frozenset({REMOVE}),
    "createIndexes": frozenset({CREATE_INDEX}),
}
"""Each command the store watch counts, and the privilege actions MongoDB requires for it."""

EXERCISED: dict[str, set[str]] = {
    "gateway": {
        "api_keys",
        "executions",
        "suspended_executions",
        "decision_claims",
        "approvals",
        "approval_slots",
        "spent_links",
        "threads",
        "agent_versions",
        "execution_progress",
        "notification_deliveries",
    },
    "orchestrator": {
        "executions",
        "execution_versions",
        "suspended_executions",
        # A deleted thread's turn erased.
        "steps",
        "attempts",
        "execution_progress",
        "checkpoints",
        "checkpoint_heads",
    },
    # A dispatch is checked against the version after the one that sent it (execution_versions);
    # the execution itself (executions) is read only when that one exists, which these flows do
    # not provoke (tests/unit/test_sandbox_admission.py does). One grant gives both reads.
    "sandbox": {
        "execution_versions",
        "steps",
        "attempts",
        "execution_progress",
        "checkpoint_heads",
    },
    "notifier": {"notification_outbox", "notification_deliveries", "notification_claims"},
    "migrator": {"executions", "api_keys", "threads", "store_migrations"},
    "keys": {"api_keys"},
}
"""Collections the flows must have reached per principal: the test covers what it claims to."""


def violations(counted: Counts, principal_of: Callable[[str], str]) -> list[str]:
    """Every counted (command, collection) its process's principal may not send, in words."""
    found = []
    for process, collection, command in sorted(counted):
        principal = principal_of(process)
        required = REQUIRED.get(command)
        if required is None:
            found.append(f"{process}: {command} on {collection}: no privilege mapping")
            continue
        missing = required - PRINCIPALS[principal].get(collection, frozenset())
        if missing:
            found.append(
                f"{process} ({principal}): {command} on {collection} needs {sorted(missing)}"
            )
    return found


def reached(counted: Counts, principal_of: Callable[[str], str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for process, collection, _ in counted:
        out.setdefault(principal_of(process), set()).add(collection)
    return out


def service_of(process: str) -> str:
    return process.rsplit("-", 1)[0]


# --- this process's own commands: the CLI's ------------------------------------------------


def own_counts(as_principal: str) -> Counts:
    """This process's command counts (the default registry the store watch reports to)."""
    return parse(generate_latest(REGISTRY).decode(), as_principal)


async def counted_while(as_principal: str, run: Callable[[], Awaitable[Any]]) -> Counts:
    before = own_counts(as_principal)
    await run()
    return diff(own_counts(as_principal), before)


async def interlock(cluster: Cluster, *args: str) -> str:
    """An `interlock` command in this process (its commands are counted here), with the
    cluster's settings; the CLI runs its own event loop, hence the thread."""
    env = {
        "INTERLOCK_MONGODB_URI": cluster.env["INTERLOCK_MONGODB_URI"],
        "INTERLOCK_MONGODB_DATABASE": cluster.database,
        "INTERLOCK_ENVIRONMENT": "test",
    }
    result = await asyncio.to_thread(CliRunner().invoke, cli, list(args), env=env)
    assert result.exit_code == 0, f"interlock {' '.join(args)}: {result.output}"
    return str(result.output)


# --- the cluster, as deployed ----------------------------------------------------------------


@pytest.fixture(scope="module")
def mailbox() -> Iterator[tuple[Mailbox, int]]:
    with smtp_server() as served:
        yield served


@dataclass
class Deployed:
    cluster: Cluster
    migrator: Counts
    """What `interlock store init` sent before the services started."""


@pytest.fixture(scope="module")
async def deployed(
    kafka_bootstrap: str,
    mongodb_uri: str,
    tmp_path_factory: pytest.TempPathFactory,
    mailbox: tuple[Mailbox, int],
) -> AsyncIterator[Deployed]:
    _, smtp_port = mailbox
    workdir = tmp_path_factory.mktemp("access")
    channels = workdir / "notifications.toml"
    # One channel that delivers (with links), one that never does (retries, then gives up).
    channels.write_text(
        f"""
[channels.reviewers]
type = "email"
host = "127.0.0.1"
port = {smtp_port}
sender = "interlock@example.test"
recipients = ["reviewers@example.test"]
action_links = true

[channels.unreachable]
type = "webhook"
url = "http://127.0.0.1:{free_port()}/hook"
secrets_env = "TEST_ACCESS_SECRETS"
"""
    )
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=workdir / "cluster")
    cluster.env |= {
        # As the manifests run them: the services leave the indexes and migrations alone.
        "INTERLOCK_STORE_INIT_AT_START": "false",
        "INTERLOCK_NOTIFICATIONS_FILE": str(channels),
        "TEST_ACCESS_SECRETS": new_secret(),
        "INTERLOCK_NOTIFICATION_POLL_SECONDS": "0.2",
        "INTERLOCK_NOTIFICATION_MAX_ATTEMPTS": "2",
        "INTERLOCK_ACTION_LINK_SECRET": LINK_SECRET,
        # The sweeps run during the flows, not an hour later.
        "INTERLOCK_DEADLINE_POLL_SECONDS": "1",
    }
    cluster.env["INTERLOCK_PUBLIC_URL"] = cluster.base_url
    # The store-init init container, before any service.
    migrator = await counted_while("migrator-0", lambda: interlock(cluster, "store", "init"))
    async with cluster.serving():
        yield Deployed(cluster, migrator)


async def owner(cluster: Cluster, email: str) -> httpx.AsyncClient:
    secret = await cluster.key(PROJECT, email=email)
    return httpx.AsyncClient(
        base_url=cluster.base_url, timeout=20, headers={"Authorization": f"Bearer {secret}"}
    )


async def drive_the_flows(cluster: Cluster, box: Mailbox) -> None:
    clients = [await owner(cluster, email) for email in (REQUESTER, "ann@x.test", "ben@x.test")]
    requester, ann, ben = (Api(c, project=PROJECT, workspace=WORKSPACE) for c in clients)
    try:
        # Durable steps, suspend, approve through the API, more steps, complete.
        first = (await requester.start_suspended("bench-pipeline", "steps=2"))["execution_id"]
        assert (await requester.resume(first, {"decision": "approve"})).status_code == 202
        await requester.wait_for(first, "completed")

        # Suspend, approve through the emailed link (spent by its first POST), complete.
        linked = (await requester.start_suspended())["execution_id"]
        found = await eventually(
            lambda: _now(box.link(linked, "approve")), bool, what="the emailed link"
        )
        async with httpx.AsyncClient(timeout=20) as browser:
            assert (await browser.get(str(found))).status_code == 200
            assert (await browser.post(str(found))).status_code == 200
        await requester.wait_for(linked, "completed")

        # Two owners other than the requester: approvals and their slots.
        quorum = (await requester.start_suspended("high-value-refund"))["execution_id"]
        assert (await ann.resume(quorum, {"decision": "approve"})).status_code == 202
        assert (await ben.resume(quorum, {"decision": "approve"})).status_code == 202
        await requester.wait_for(quorum, "completed")

        # A cancel of a suspended execution.
        cancelled = (await requester.start_suspended())["execution_id"]
        url = f"/api/v1/projects/{PROJECT}/executions/{cancelled}/cancel"
        response = await ann.client.post(url, params={"workspace_id": WORKSPACE}, json={})
        assert response.status_code == 202, response.text
        await requester.wait_for(cancelled, "cancelled")

        # The gateway's reads: one execution, its audit, lists, pending reviews, the
        # notifications, the stream, LangGraph threads.
        waiting = (await requester.start_suspended())["execution_id"]
        await gateway_reads(requester, first, waiting)
        await delete_a_thread(requester, cluster)
    finally:
        for client in clients:
            await client.aclose()


async def gateway_reads(api: Api, ended: str, waiting: str) -> None:
    http = api.client
    base = f"/api/v1/projects/{PROJECT}"
    scope = {"workspace_id": WORKSPACE}
    assert (await api.audit(ended)).status_code == 200
    assert (await http.get(f"{base}/executions", params=scope)).status_code == 200
    pending = await http.get(f"{base}/executions", params={**scope, "status": "suspended"})
    assert waiting in pending.text, pending.text
    notified = await eventually(
        lambda: http.get(f"{base}/notifications"),
        lambda r: r.status_code == 200 and waiting in r.text,
        what="the notifications list",
    )
    assert notified.status_code == 200
    async with (
        asyncio.timeout(30),
        http.stream("GET", f"{base}/executions/{ended}/stream", params=scope) as stream,
    ):
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if "completed" in line:
                break
    threads = f"/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}/threads"
    created = await http.post(threads, json={"metadata": {"purpose": "store access"}})
    assert created.status_code == 200, created.text
    thread_id = created.json()["thread_id"]
    assert (await http.get(f"{threads}/{thread_id}")).status_code == 200
    assert (await http.post(f"{threads}/search", json={})).status_code == 200


async def delete_a_thread(api: Api, cluster: Cluster) -> None:
    """A thread with a turn, deleted: the gateway marks it, the orchestrator erases the turn's
    checkpoints and working data."""
    threads = f"/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}/threads"
    thread_id = (await api.client.post(threads, json={})).json()["thread_id"]
    said = {"messages": [{"role": "user", "content": "hello"}]}
    ran = await api.client.post(
        f"{threads}/{thread_id}/runs/wait", json={"assistant_id": "conversation", "input": said}
    )
    assert ran.status_code == 200, ran.text
    assert (await api.client.delete(f"{threads}/{thread_id}")).status_code == 204
    turn = turn_execution_id(PROJECT, WORKSPACE, thread_id, 1)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        cluster.env["INTERLOCK_MONGODB_URI"]
    )
    try:
        heads = client[cluster.database].checkpoint_heads
        await eventually(
            lambda: heads.count_documents({"thread_id": turn}),
            lambda n: n == 0,
            what="the deleted thread's checkpoints erased",
        )
    finally:
        await client.close()


async def _now(value: str | None) -> str | None:
    return value


# --- the test --------------------------------------------------------------------------------


async def test_every_command_each_process_sends_is_one_its_role_allows(
    deployed: Deployed, mailbox: tuple[Mailbox, int]
) -> None:
    cluster = deployed.cluster
    box, _ = mailbox
    await drive_the_flows(cluster, box)
    # `interlock keys`, as an operator runs it.
    keys = await counted_while("keys-0", lambda: operate_keys(cluster))

    ports = {f"{s}-{i}": port for (s, i), port in cluster.health_ports.items()}
    # A few more of the periodic commands (the sweeps every second, the notifier's poll), which
    # never settle: their counts are read as they are.
    await asyncio.sleep(2)
    async with httpx.AsyncClient(timeout=10) as metrics:
        services = await scrape(metrics, ports)

    counted = {**services, **deployed.migrator, **keys}
    refused = violations(counted, service_of)
    assert not refused, "commands the roles would refuse:\n" + "\n".join(refused)
    exercised = reached(counted, service_of)
    for principal, collections in EXERCISED.items():
        missing = collections - exercised.get(principal, set())
        assert not missing, f"the flows never had {principal} reach {sorted(missing)}"


async def operate_keys(cluster: Cluster) -> None:
    secret = await interlock(
        cluster, "keys", "create", "--project", PROJECT, "--role", "PROJECT_OWNER", "--quiet"
    )
    key_id = secret.strip().split("_")[1]
    assert key_id in await interlock(cluster, "keys", "list", "--project", PROJECT)
    await interlock(cluster, "keys", "revoke", key_id, "--project", PROJECT)
