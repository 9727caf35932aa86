"""Issue 17, findings 1, 3 (approvals) and 5, written as the attacks: the four services as
processes on real Kafka and FerretDB, two email channels with approve / reject links, and an SMTP
server on loopback in the test process.

- two links (or one owner and one link) cannot pay a high-value refund;
- the requester cannot decide their own request through the link in their mailbox;
- a link is spent by its first POST;
- an approval from a key revoked before the quorum completes does not count;
- a page cursor tells a key limited to one workspace nothing about the others.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pymongo import AsyncMongoClient

from shared.domain.principals import person
from shared.notifications.action_links import LinkMinter
from shared.notifications.model import Notification
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.e2e.mailbox import Mailbox, smtp_server
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

PROJECT = "proj-links"
WORKSPACE = "ws-links"
LINK_SECRET = "e2e-links-secret-0123456789abcdef"
REQUESTER = "requester@example.test"


@pytest.fixture(scope="module")
def mailbox() -> Iterator[tuple[Mailbox, int]]:
    with smtp_server() as served:
        yield served


@pytest.fixture(scope="module")
async def links_cluster(
    kafka_bootstrap: str,
    mongodb_uri: str,
    tmp_path_factory: pytest.TempPathFactory,
    mailbox: tuple[Mailbox, int],
) -> AsyncIterator[Cluster]:
    _, smtp_port = mailbox
    workdir = tmp_path_factory.mktemp("links")
    channels = workdir / "notifications.toml"
    # The requester is among the managers' recipients: they receive links about their own
    # requests, as a requester often does.
    channels.write_text(
        f"""
[channels.reviewers-email]
type = "email"
host = "127.0.0.1"
port = {smtp_port}
sender = "interlock@example.test"
recipients = ["reviewers@example.test"]
action_links = true

[channels.managers-email]
type = "email"
host = "127.0.0.1"
port = {smtp_port}
sender = "interlock@example.test"
recipients = ["managers@example.test", "{REQUESTER}"]
action_links = true
"""
    )
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=workdir / "cluster")
    cluster.env |= {
        "INTERLOCK_NOTIFICATIONS_FILE": str(channels),
        "INTERLOCK_NOTIFICATION_POLL_SECONDS": "0.2",
        "INTERLOCK_ACTION_LINK_SECRET": LINK_SECRET,
    }
    cluster.env["INTERLOCK_PUBLIC_URL"] = cluster.base_url
    async with cluster.serving():
        yield cluster


class Person:
    """One API key of the links project, as its holder uses it."""

    def __init__(self, api: Api, secret: str) -> None:
        self.api = api
        self.key_id = secret.split("_")[1]

    @property
    def label_prefix(self) -> str:
        return f"key:{self.key_id} "


@pytest.fixture
async def people(links_cluster: Cluster) -> AsyncIterator[dict[str, Person]]:
    """The requester and three owners, each a person with a key of their own."""
    clients: list[httpx.AsyncClient] = []
    found: dict[str, Person] = {}
    for name in ("requester", "ann", "ben", "cat"):
        email = REQUESTER if name == "requester" else f"{name}@example.test"
        secret = await links_cluster.key(PROJECT, email=email)
        client = httpx.AsyncClient(
            base_url=links_cluster.base_url,
            timeout=20,
            headers={"Authorization": f"Bearer {secret}"},
        )
        clients.append(client)
        found[name] = Person(Api(client, project=PROJECT, workspace=WORKSPACE), secret)
    try:
        yield found
    finally:
        for client in clients:
            await client.aclose()


async def emailed_links(box: Mailbox, address: str, execution_id: str) -> dict[str, str]:
    async def probe() -> dict[str, str] | None:
        return box.links_for(address, execution_id)

    found = await eventually(probe, lambda links: links is not None, what=f"email to {address}")
    assert found is not None
    return found


def minted(cluster: Cluster, execution_id: str, email: str, channel: str) -> dict[str, str]:
    """Validly signed links of every decision for ``email``: what an attacker holding any link
    secret's output could present (the notifier mints no approve links for these agents)."""
    notification = Notification(
        notification_id=f"{execution_id}:1:{channel}",
        project_id=PROJECT,
        workspace_id=WORKSPACE,
        execution_id=execution_id,
        agent="high-value-refund",
        suspension_id=1,
        allowed_decisions=["approve", "reject"],
        link_decisions=["approve", "reject"],
        review_url=cluster.base_url,
    )
    minter = LinkMinter(secret=LINK_SECRET, base_url=cluster.base_url)
    return minter.links(notification, channel=channel, recipient=person(email))


async def test_links_cannot_pay_a_high_value_refund_nor_act_for_its_requester(
    links_cluster: Cluster, people: dict[str, Person], mailbox: tuple[Mailbox, int]
) -> None:
    box, _ = mailbox
    requester, ann = people["requester"].api, people["ann"].api
    execution_id = (await requester.start_suspended("high-value-refund"))["execution_id"]

    # The agent takes approvals from API keys only: its emails carry a reject link alone.
    for address in ("reviewers@example.test", "managers@example.test", REQUESTER):
        assert list(await emailed_links(box, address, execution_id)) == ["reject"]

    async with httpx.AsyncClient(timeout=20) as browser:  # no API key: the link is the grant
        # The two-links refund: validly signed approve links of both channels are refused.
        reviewers = minted(links_cluster, execution_id, "reviewers@example.test", "reviewers-email")
        managers = minted(links_cluster, execution_id, "managers@example.test", "managers-email")
        for links in (reviewers, managers):
            refused = await browser.post(links["approve"])
            assert refused.status_code == 403 and "only from API keys" in refused.text
        # One owner and one link: the owner's approval waits; the link does not add to it.
        partial = await ann.resume(execution_id, {"decision": "approve"})
        assert partial.json()["status"] == "awaiting_approvals", partial.text
        more = minted(links_cluster, execution_id, "reviewers@example.test", "reviewers-email")
        refused = await browser.post(more["approve"])
        assert refused.status_code == 403
        shown = await requester.status_of(execution_id)
        assert shown["status"] == "suspended"
        [only] = shown["approvals"]
        assert only["reviewer"].startswith(people["ann"].label_prefix) and not only["via_link"]

        # The requester's own mailbox: their link is refused, and spent by that first POST.
        own = (await emailed_links(box, REQUESTER, execution_id))["reject"]
        refused = await browser.post(own)
        assert refused.status_code == 403 and "another owner" in refused.text
        again = await browser.post(own)
        assert again.status_code == 409 and "used already" in again.text
        assert (await requester.status_of(execution_id))["status"] == "suspended"

        # A reviewer who is not the requester may reject through their link.
        reject = (await emailed_links(box, "reviewers@example.test", execution_id))["reject"]
        assert (await browser.post(reject)).status_code == 200
    done = await requester.wait_for(execution_id, "completed")
    assert done["result"]["outcome"] == "rejected"
    assert done["decisions"][0]["reviewer"] == "link:reviewers-email for reviewers@example.test"


async def test_a_link_is_spent_by_its_first_post_and_never_stored(
    links_cluster: Cluster,
    people: dict[str, Person],
    mailbox: tuple[Mailbox, int],
    mongodb_uri: str,
) -> None:
    box, _ = mailbox
    requester = people["requester"].api
    execution_id = (await requester.start_suspended("refund-approval"))["execution_id"]
    approve = (await emailed_links(box, "managers@example.test", execution_id))["approve"]
    async with httpx.AsyncClient(timeout=20) as browser:
        assert (await browser.post(approve)).status_code == 200
        again = await browser.post(approve)
        assert again.status_code == 409 and "used already" in again.text
    done = await requester.wait_for(execution_id, "completed")
    assert done["decisions"][0]["reviewer"] == "link:managers-email for managers@example.test"
    assert len(done["decisions"]) == 1

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_uri)
    try:
        database = client[links_cluster.database]
        stored = [
            json.dumps(document, default=str)
            async for document in database["notification_deliveries"].find()
        ]
    finally:
        await client.close()
    assert any(execution_id in document for document in stored)
    token = approve.rsplit("/", 1)[1]
    assert not any("/act/" in document or token in document for document in stored)


async def test_an_approval_from_a_key_revoked_before_the_quorum_does_not_count(
    links_cluster: Cluster, people: dict[str, Person]
) -> None:
    requester = people["requester"].api
    ann, ben, cat = people["ann"], people["ben"], people["cat"]
    execution_id = (await requester.start_suspended("high-value-refund"))["execution_id"]
    first = await ann.api.resume(execution_id, {"decision": "approve"})
    assert first.json()["status"] == "awaiting_approvals", first.text

    revoked = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "interlock.cli", "keys", "revoke", ann.key_id, "--project", PROJECT],
        env=links_cluster.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert revoked.returncode == 0, revoked.stderr

    second = (await ben.api.resume(execution_id, {"decision": "approve"})).json()
    assert second["status"] == "awaiting_approvals", second
    assert [a.startswith(ben.label_prefix) for a in second["approvals"]] == [True]
    [discounted] = second["discounted_approvals"]
    assert discounted.startswith(ann.label_prefix) and "key revoked" in discounted

    third = (await cat.api.resume(execution_id, {"decision": "approve"})).json()
    assert third["status"] == "accepted", third
    done = await requester.wait_for(execution_id, "completed")
    [decision] = done["decisions"]
    assert [a.split(" ")[0] for a in decision["approvers"]] == [
        f"key:{ben.key_id}",
        f"key:{cat.key_id}",
    ]
    assert decision["discounted_approvers"][0].startswith(ann.label_prefix)
    audit = (await requester.audit(execution_id)).json()
    assert audit["decisions"][0]["discounted_approvers"] == decision["discounted_approvers"]


def _decoded(cursor: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return b""


async def test_a_page_cursor_shows_a_confined_key_nothing_of_other_workspaces(
    links_cluster: Cluster, people: dict[str, Person], mailbox: tuple[Mailbox, int]
) -> None:
    box, _ = mailbox
    owner = people["requester"].api
    ours = [(await owner.start_suspended())["execution_id"] for _ in range(3)]
    confined_secret = await links_cluster.key(PROJECT, workspaces=["other"])
    headers = {"Authorization": f"Bearer {confined_secret}"}
    async with httpx.AsyncClient(
        base_url=links_cluster.base_url, timeout=20, headers=headers
    ) as confined:
        theirs = Api(confined, project=PROJECT, workspace="other")
        mine = [(await theirs.start_suspended())["execution_id"] for _ in range(2)]
        for execution_id in (*ours, *mine):
            await emailed_links(box, "reviewers@example.test", execution_id)

        async def page(client: httpx.AsyncClient, cursor: str | None) -> httpx.Response:
            params: dict[str, Any] = {"limit": 1}
            if cursor is not None:
                params["cursor"] = cursor
            return await client.get(f"/api/v1/projects/{PROJECT}/notifications", params=params)

        # The list is ordered by last change, so a delivery still being sent moves to the end
        # and would be paged twice: page once every delivery of ours has settled.
        async def settled() -> list[str]:
            response = await confined.get(f"/api/v1/projects/{PROJECT}/notifications")
            items = response.json()["items"]
            return [item["status"] for item in items]

        await eventually(
            settled,
            lambda statuses: (
                len(statuses) == 2 * len(mine) and all(status == "delivered" for status in statuses)
            ),
            what="both channels' deliveries of the confined key's executions",
        )
        seen: list[str] = []
        cursors: list[str] = []
        cursor: str | None = None
        while True:
            response = await page(confined, cursor)
            assert response.status_code == 200, response.text
            body = response.json()
            seen.extend(item["execution_id"] for item in body["items"])
            cursor = body["next_cursor"]
            if cursor is None:
                break
            cursors.append(cursor)
        assert sorted(set(seen)) == sorted(mine) and len(seen) == 2 * len(mine)  # two channels
        for sealed in cursors:
            for leaked in (*ours, WORKSPACE, ":1:"):
                assert leaked not in sealed and leaked.encode() not in _decoded(sealed)

        tampered = cursors[0][:-3] + ("AAA" if not cursors[0].endswith("AAA") else "BBB")
        assert (await page(confined, tampered)).json()["type"].endswith("/invalid-cursor")
        # Another key, or another route, cannot use it either.
        other = await page(people["requester"].api.client, cursors[0])
        assert other.status_code == 400 and other.json()["type"].endswith("/invalid-cursor")
        listed = await confined.get(
            f"/api/v1/projects/{PROJECT}/executions",
            params={"workspace_id": "other", "cursor": cursors[0]},
        )
        assert listed.status_code == 400
