"""The production overlay's Kafka authorization on a real broker (issue 31, item 2).

The local broker (infra/infra.sh) authorizes with ACLs on its SASL listener. This test makes
one SCRAM-SHA-512 principal per KafkaUser of deploy/k8s/overlays/prod/kafka-users.yaml, grants
it exactly that KafkaUser's ACLs (topics and groups under this run's prefixes), and runs the four
services as separate processes, each as its own principal, over that listener:

- the ACLs are enough: a refund suspends, is approved through the API and pays; a cancel stops
  another; a poison request is dead-lettered; the notifier's group reads the suspensions; and no
  process logs an authorization failure (the lag gauges included);
- the sandbox's principal, which runs agent code, can write neither decision.submitted nor any
  other control topic, nor read them; the example outside producer may write decisions only.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

# confluent_kafka.admin re-exports these without an __all__, so mypy calls them private.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.deploy.kafka_acls import Grant, grants_of, source_users
from tests.e2e.cluster import SERVICES, Cluster
from tests.e2e.conftest import Api, ledger_entries
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

SASL_SERVERS = "INTERLOCK_TEST_KAFKA_SASL_SERVERS"
PROJECT, WORKSPACE = "proj-acls", "ws-acls"
CONTROL_TOPICS = ("decision.submitted", "execution.requested", "execution.cancel_requested")
AUTHORIZATION_FAILURES = ("AuthorizationFailed", "not authorized", "Authorization failed")


@dataclass(frozen=True)
class Principal:
    user: str
    password: str


class Broker:
    """The super user's view of the local broker (its PLAINTEXT listener is ANONYMOUS, a super
    user: infra/infra.sh), and the principals this run made on it."""

    def __init__(self, bootstrap: str, sasl_servers: str, cluster: Cluster) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.admin_bootstrap = bootstrap
        self.sasl_servers = sasl_servers
        self.topic_prefix = cluster.topic_prefix
        self.group_prefix = cluster.env["INTERLOCK_CONSUMER_GROUP_PREFIX"]
        self.run_id = cluster.run_id
        self.principals: dict[str, Principal] = {}
        self.bindings: list[AclBinding] = []

    def name_on_broker(self, grant: Grant) -> str:
        """The KafkaUser's resource under this run's prefixes (topics ``<prefix><name>``, groups
        ``<group prefix>.<service>`` where production has ``interlock.<service>``)."""
        if grant.resource == "topic":
            return f"{self.topic_prefix}{grant.name}"
        return f"{self.group_prefix}.{grant.name.removeprefix('interlock.')}"

    def create_principals(self, grants: list[Grant]) -> None:
        for user in sorted({g.user for g in grants}):
            self.principals[user] = Principal(f"{self.run_id}-{user}", secrets.token_urlsafe(18))
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(
                p.user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), p.password.encode()
            )
            for p in self.principals.values()
        ]
        for future in self.admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)
        kinds = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP}
        operations = {"Read": AclOperation.READ, "Write": AclOperation.WRITE}
        self.bindings = [
            AclBinding(
                kinds[g.resource],
                self.name_on_broker(g),
                ResourcePatternType.LITERAL,
                f"User:{self.principals[g.user].user}",
                "*",
                operations[g.operation],
                AclPermissionType.ALLOW,
            )
            for g in grants
        ]
        for future in self.admin.create_acls(self.bindings).values():
            future.result(timeout=30)

    def remove_principals(self) -> None:
        if self.bindings:
            filters = [
                AclBindingFilter(
                    b.restype,
                    b.name,
                    b.resource_pattern_type,
                    b.principal,
                    b.host,
                    b.operation,
                    b.permission_type,
                )
                for b in self.bindings
            ]
            for future in self.admin.delete_acls(filters).values():
                future.result(timeout=30)
        deletions: list[UserScramCredentialAlteration] = [
            UserScramCredentialDeletion(p.user, ScramMechanism.SCRAM_SHA_512)
            for p in self.principals.values()
        ]
        if deletions:
            for future in self.admin.alter_user_scram_credentials(deletions).values():
                future.result(timeout=30)

    def client_settings(self, user: str) -> dict[str, str]:
        """What a service's pod gets in production (kafka-clients.yaml), on the loopback
        listener without TLS."""
        principal = self.principals[user]
        return {
            "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS": self.sasl_servers,
            "INTERLOCK_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "INTERLOCK_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "INTERLOCK_KAFKA_SASL_USERNAME": principal.user,
            "INTERLOCK_KAFKA_SASL_PASSWORD": principal.password,
        }

    def aiokafka_options(self, user: str) -> dict[str, str]:
        principal = self.principals[user]
        return {
            "bootstrap_servers": self.sasl_servers,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": principal.user,
            "sasl_plain_password": principal.password,
        }


@pytest.fixture(scope="module")
def sasl_servers() -> str:
    servers = os.environ.get(SASL_SERVERS)
    if not servers:
        # Only with testcontainers' Kafka (a user's laptop), which has no SASL listener; CI and
        # `make test` run infra/infra.sh, which always exports it, so there this runs.
        pytest.skip(f"no authorizing SASL listener: {SASL_SERVERS} is unset (infra/infra.sh)")
    return servers


@pytest.fixture(scope="module")
async def authorized(
    kafka_bootstrap: str,
    mongodb_uri: str,
    sasl_servers: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[Cluster, Broker]]:
    cluster = Cluster(
        kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path_factory.mktemp("acls")
    )
    broker = Broker(kafka_bootstrap, sasl_servers, cluster)
    broker.create_principals(grants_of(source_users()))
    cluster.create_topics()  # as the KafkaTopics are in production: by the operator, not us
    for service in SERVICES:
        cluster.start(service, env=broker.client_settings(f"interlock-{service}"))
    try:
        await cluster.wait_ready()
        yield cluster, broker
    finally:
        cluster.stop()
        await cluster.delete_topics()
        broker.remove_principals()


@asynccontextmanager
async def people(cluster: Cluster) -> AsyncIterator[tuple[Api, Api]]:
    clients = []
    for email in ("requester@example.com", "owner@example.com"):
        key = await cluster.key(PROJECT, email=email)
        clients.append(
            httpx.AsyncClient(
                base_url=cluster.base_url, timeout=20, headers={"Authorization": f"Bearer {key}"}
            )
        )
    try:
        yield (
            Api(clients[0], project=PROJECT, workspace=WORKSPACE),
            Api(clients[1], project=PROJECT, workspace=WORKSPACE),
        )
    finally:
        for client in clients:
            await client.aclose()


def authorization_failures(cluster: Cluster) -> Iterator[str]:
    for path in sorted(cluster.workdir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(marker in line for marker in AUTHORIZATION_FAILURES):
                yield f"{path.name}: {line[:300]}"


async def committed(broker: Broker, service: str, topic: str) -> int:
    """How many messages of ``topic`` the service's group has committed, over all partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.admin_bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(f"{broker.group_prefix}.{service}")
    finally:
        await admin.close()
    name = f"{broker.topic_prefix}{topic}"
    return sum(meta.offset for tp, meta in offsets.items() if tp.topic == name)


async def test_the_services_work_under_exactly_the_production_acls(
    authorized: tuple[Cluster, Broker],
) -> None:
    cluster, broker = authorized
    async with people(cluster) as (requester, owner):
        refund = await requester.start_suspended("refund-approval", "Refund claim CLM-4821")
        refund_id = refund["execution_id"]
        approved = await owner.resume(refund_id, {"decision": "approve"})
        assert approved.status_code == 202, approved.text
        done = await owner.wait_for(refund_id, "completed")
        assert done["status"] == "completed"
        assert [e["kind"] for e in ledger_entries(cluster, refund_id)] == ["refund"]

        other = await requester.start_suspended("refund-approval", "Refund claim CLM-4821")
        cancelled = await owner.client.post(
            f"/api/v1/projects/{PROJECT}/executions/{other['execution_id']}/cancel",
            params={"workspace_id": WORKSPACE},
        )
        assert cancelled.status_code == 202, cancelled.text
        await owner.wait_for(other["execution_id"], "cancelled")

    # A poison request, from the super user: the orchestrator's principal writes the dead letter.
    poison = AIOKafkaProducer(bootstrap_servers=broker.admin_bootstrap)
    await poison.start()
    try:
        sent = await poison.send_and_wait(
            f"{broker.topic_prefix}execution.requested", b"not json", key=b"poison"
        )
    finally:
        await poison.stop()
    letters = AIOKafkaConsumer(
        f"{broker.topic_prefix}execution.dead_lettered",
        bootstrap_servers=broker.admin_bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await letters.start()
    try:

        async def dead_letter() -> list[dict[str, object]]:
            batches = await letters.getmany(timeout_ms=1000)
            return [json.loads(r.value) for rs in batches.values() for r in rs if r.value]

        found: list[dict[str, object]] = []

        async def read_letters() -> list[dict[str, object]]:
            found.extend(await dead_letter())
            return [
                letter
                for letter in found
                if letter.get("source_topic") == sent.topic and letter.get("offset") == sent.offset
            ]

        await eventually(read_letters, bool, timeout=60, what="the poison request's dead letter")
    finally:
        await letters.stop()

    # The notifier's group read every suspension under its own principal.
    await eventually(
        lambda: committed(broker, "notifier", "execution.suspended"),
        lambda count: count >= 2,
        timeout=30,
        what="the notifier to commit both suspensions",
    )
    # The consumer lag gauges read their groups' offsets (a refused OffsetFetch would be logged).
    await asyncio.sleep(2)
    assert list(authorization_failures(cluster)) == []


@pytest.mark.parametrize("topic", CONTROL_TOPICS)
async def test_the_sandbox_principal_cannot_write_a_control_topic(
    authorized: tuple[Cluster, Broker], topic: str
) -> None:
    _, broker = authorized
    producer = AIOKafkaProducer(**broker.aiokafka_options("interlock-sandbox"), acks="all")
    await producer.start()
    try:
        forged = json.dumps({"execution_id": "e-forged", "decision": "approve"}).encode()
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(f"{broker.topic_prefix}{topic}", forged, key=b"e-forged")
        # What it may write, it can: the refusal is the ACL, not a broken connection.
        await producer.send_and_wait(
            f"{broker.topic_prefix}execution.activity", b"{}", key=b"e-allowed"
        )
    finally:
        await producer.stop()


async def test_the_sandbox_principal_cannot_read_decisions_in_another_group(
    authorized: tuple[Cluster, Broker],
) -> None:
    """Reading decision.submitted is refused too, in its own group or the orchestrator's."""
    _, broker = authorized
    for group in (f"{broker.group_prefix}.sandbox", f"{broker.group_prefix}.orchestrator"):
        consumer = AIOKafkaConsumer(
            f"{broker.topic_prefix}decision.submitted",
            **broker.aiokafka_options("interlock-sandbox"),
            group_id=group,
            auto_offset_reset="earliest",
        )
        try:
            with pytest.raises((TopicAuthorizationFailedError, GroupAuthorizationFailedError)):
                await consumer.start()
                await consumer.getmany(timeout_ms=5000)
        finally:
            await consumer.stop()


async def test_the_example_outside_producer_writes_decisions_only(
    authorized: tuple[Cluster, Broker],
) -> None:
    _, broker = authorized
    producer = AIOKafkaProducer(**broker.aiokafka_options("decision-producer"), acks="all")
    await producer.start()
    try:
        # Written (the orchestrator then judges it: it is not signed, so it is dead-lettered).
        await producer.send_and_wait(
            f"{broker.topic_prefix}decision.submitted", b"{}", key=b"e-outside"
        )
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(
                f"{broker.topic_prefix}execution.requested", b"{}", key=b"e-outside"
            )
    finally:
        await producer.stop()
