"""Notifications end to end: the four services as processes on real Kafka and FerretDB, a
webhook receiver and an SMTP server on loopback in the test process.

The receivers check what reviewers' systems would check: the webhook's Standard Webhooks
signature (with the independent ``standardwebhooks`` verifier, against the new and the old
secret of a rotation), and the email's parts and link."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.notifier.channels.webhook import new_secret
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.e2e.mailbox import Mailbox, smtp_server
from tests.eventually import eventually
from tests.ports import free_port

pytestmark = pytest.mark.e2e

OLD_SECRET, NEW_SECRET = new_secret(), new_secret()
PROJECT = "proj-notify"


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified_with: list[str]


@dataclass
class Receiver:
    """Answers every POST to /ok with 204 and to /broken with 500, recording what came."""

    port: int = field(default_factory=free_port)
    calls: dict[str, list[Received]] = field(default_factory=lambda: {"ok": [], "broken": []})

    async def record(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        verified = []
        for name, secret in (("new", NEW_SECRET), ("old", OLD_SECRET)):
            try:
                Webhook(secret).verify(body, headers)
                verified.append(name)
            except WebhookVerificationError:
                pass
        path = request.url.path.strip("/")
        self.calls[path].append(Received(headers, body, verified))
        return Response(status_code=204 if path == "ok" else 500)

    def app(self) -> Starlette:
        routes = [Route(f"/{path}", self.record, methods=["POST"]) for path in self.calls]
        return Starlette(routes=routes)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    running = Receiver()
    config = uvicorn.Config(running.app(), host="127.0.0.1", port=running.port, log_config=None)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await eventually(_true(lambda: server.started), bool, timeout=10, what="the webhook receiver")
    try:
        yield running
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def mailbox() -> Iterator[tuple[Mailbox, int]]:
    with smtp_server() as served:
        yield served


@pytest.fixture
async def notifying_cluster(
    kafka_bootstrap: str,
    mongodb_uri: str,
    tmp_path: Path,
    receiver: Receiver,
    mailbox: tuple[Mailbox, int],
) -> AsyncIterator[Cluster]:
    _, smtp_port = mailbox
    base = f"http://127.0.0.1:{receiver.port}"
    channels = tmp_path / "notifications.toml"
    channels.write_text(
        f"""
[channels.ops]
type = "webhook"
url = "{base}/ok"
secrets_env = "TEST_OPS_SECRETS"

[channels.broken]
type = "webhook"
url = "{base}/broken"
secrets_env = "TEST_OPS_SECRETS"
agents = ["refund-approval"]

[channels.reviewers]
type = "email"
host = "127.0.0.1"
port = {smtp_port}
sender = "interlock@example.test"
recipients = ["reviewers@example.test"]
projects = ["{PROJECT}"]
action_links = true
"""
    )
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path / "cluster")
    cluster.env |= {
        "INTERLOCK_NOTIFICATIONS_FILE": str(channels),
        # A rotation in progress: every delivery is signed with both secrets.
        "TEST_OPS_SECRETS": f"{NEW_SECRET},{OLD_SECRET}",
        "INTERLOCK_NOTIFICATION_MAX_ATTEMPTS": "3",
        "INTERLOCK_NOTIFICATION_POLL_SECONDS": "0.2",
        "INTERLOCK_ACTION_LINK_SECRET": "e2e-action-link-secret-0123456789",
    }
    cluster.env["INTERLOCK_PUBLIC_URL"] = cluster.base_url
    async with cluster.serving():
        yield cluster


@pytest.fixture
async def api(notifying_cluster: Cluster) -> AsyncIterator[Api]:
    headers = {"Authorization": f"Bearer {await notifying_cluster.key(PROJECT)}"}
    async with httpx.AsyncClient(
        base_url=notifying_cluster.base_url, timeout=20, headers=headers
    ) as client:
        yield Api(client, project=PROJECT, workspace="ws-notify")


async def test_a_suspension_is_announced_once_on_every_channel_even_when_redelivered(
    api: Api, notifying_cluster: Cluster, receiver: Receiver, mailbox: tuple[Mailbox, int]
) -> None:
    box, _ = mailbox
    execution = await api.start_suspended()
    execution_id = execution["execution_id"]
    ok = await eventually(
        _value(lambda: list(receiver.calls["ok"])), lambda c: len(c) >= 1, what="the webhook"
    )
    [call] = ok
    assert call.verified_with == ["new", "old"]  # each secret of the rotation verifies it
    assert call.headers["webhook-id"] == f"{execution_id}:1:ops"
    payload = json.loads(call.body)
    assert payload["type"] == "review.requested"
    data = payload["data"]
    assert data["suspend_context"]["claim_id"] == "CLM-4821"
    assert data["allowed_decisions"] == ["approve", "reject"]
    expected_link = f"{notifying_cluster.base_url}/reviews#review={execution_id}"
    assert data["review_url"] == expected_link
    [mail] = await eventually(
        _value(lambda: list(box.messages)), lambda m: len(m) >= 1, what="the email"
    )
    assert "refund-approval" in mail["Subject"]
    parts = {part.get_content_type(): part.get_payload(decode=True) for part in mail.walk()}
    assert expected_link.encode() in parts["text/plain"]
    assert expected_link.encode() in parts["text/html"]

    # The notifier reads every event again (a new consumer group): nobody is told twice.
    notifying_cluster.stop("notifier")
    notifying_cluster.env["INTERLOCK_CONSUMER_GROUP_PREFIX"] += "-again"
    notifying_cluster.start("notifier")
    await notifying_cluster.wait_ready()
    await asyncio.sleep(3)  # time for a second delivery to show up, were there one
    assert len(receiver.calls["ok"]) == 1 and len(box.messages) == 1


async def test_a_failing_endpoint_ends_dead_while_the_others_still_get_through(
    api: Api, receiver: Receiver
) -> None:
    first = (await api.start_suspended())["execution_id"]
    second = (await api.start_suspended())["execution_id"]

    async def dead() -> list[dict[str, Any]]:
        response = await api.client.get(
            f"/api/v1/projects/{PROJECT}/notifications", params={"status": "dead"}
        )
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    letters = await eventually(dead, lambda d: len(d) >= 2, timeout=60, what="dead deliveries")
    assert {d["execution_id"] for d in letters} == {first, second}
    for letter in letters:
        assert letter["channel"] == "broken" and letter["attempts"] == 3
        assert "gave up after 3 attempt(s)" in letter["last_error"]
        assert "500" in letter["last_error"]
    assert len(receiver.calls["broken"]) == 6  # three attempts each, no more
    delivered = {json.loads(c.body)["data"]["execution_id"] for c in receiver.calls["ok"]}
    assert delivered == {first, second}


def _true(check: Any) -> Any:
    async def probe() -> bool:
        return bool(check())

    return probe


def _value(get: Any) -> Any:
    async def probe() -> Any:
        return get()

    return probe


async def test_the_approve_link_in_the_email_decides_once(
    api: Api, notifying_cluster: Cluster, mailbox: tuple[Mailbox, int]
) -> None:
    box, _ = mailbox
    execution_id = (await api.start_suspended())["execution_id"]
    [mail] = await eventually(
        _value(lambda: list(box.messages)), lambda m: len(m) >= 1, what="the email"
    )
    parts = {part.get_content_type(): part.get_payload(decode=True) for part in mail.walk()}
    text = parts["text/plain"].decode()
    [approve] = re.findall(r"Approve without opening it \(asks to confirm\): (\S+)", text)
    assert approve.startswith(f"{notifying_cluster.base_url}/act/")
    assert approve.encode() in parts["text/html"]
    async with httpx.AsyncClient(timeout=20) as browser:  # no API key: the link is the grant
        confirm = await browser.get(approve)
        assert confirm.status_code == 200 and "Confirm: approve" in confirm.text
        assert (await api.status_of(execution_id))["status"] == "suspended"
        decided = await browser.post(approve)
        assert decided.status_code == 200, decided.text
        done = await api.wait_for(execution_id, "completed")
        # The decision is the recipient's, and says so.
        assert done["decisions"][0]["reviewer"] == "link:reviewers for reviewers@example.test"
        again = await browser.post(approve)
        assert again.status_code == 409 and "used already" in again.text
