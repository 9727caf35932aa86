"""The prod overlay's Kafka authorization, offline: one authenticated listener, one principal per
service, and ACLs that let each write only the topics docs/security.md says it may ("Who may
produce what"). That these ACLs are also enough for the services to work is shown on a real
broker by tests/e2e/test_kafka_acls.py."""

from __future__ import annotations

from collections import defaultdict

import pytest

from interlock.cli import ServiceName
from shared.topics import Topics
from tests.deploy.kafka_acls import Grant, grants_of, source_users
from tests.deploy.manifests import Manifests, Resource

SERVICES = [str(s) for s in ServiceName]
EXAMPLE_PRODUCER = "decision-producer"

WRITERS = {
    "execution.requested": {"gateway"},
    "decision.submitted": {"gateway", EXAMPLE_PRODUCER},
    "execution.cancel_requested": {"gateway"},
    "thread.delete_requested": {"gateway"},
    "execution.dispatched": {"orchestrator"},
    "execution.suspended": {"sandbox"},
    "execution.reported": {"sandbox"},
    "execution.status": {"orchestrator"},
    "execution.activity": {"orchestrator", "sandbox"},
    "review.deadline": {"orchestrator"},
    "run.webhook": {"orchestrator"},
    "execution.dead_lettered": {"orchestrator", "sandbox", "notifier"},
}
"""Who may write each topic: the table in docs/security.md."""

READERS = {
    "execution.requested": {"orchestrator"},
    "decision.submitted": {"orchestrator"},
    "execution.cancel_requested": {"orchestrator"},
    "thread.delete_requested": {"orchestrator"},
    "execution.dispatched": {"sandbox"},
    "execution.suspended": {"orchestrator", "notifier"},
    "execution.reported": {"orchestrator"},
    "execution.status": set(),
    "execution.activity": {"gateway"},
    "review.deadline": {"notifier"},
    "run.webhook": {"notifier"},
    "execution.dead_lettered": set(),
}
"""Who may read each topic. execution.status and the dead letters are for outside systems, which
get principals of their own."""

CONTROL_TOPICS = {
    "execution.requested",
    "decision.submitted",
    "execution.cancel_requested",
    "thread.delete_requested",
}


def short(user: str) -> str:
    return user.removeprefix("interlock-")


def by_topic(grants: list[Grant], operation: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for grant in grants:
        if grant.resource == "topic" and grant.operation == operation:
            found[grant.name].add(short(grant.user))
    return found


@pytest.fixture(scope="module")
def users(prod: Manifests) -> list[Resource]:
    return prod.of_kind("KafkaUser")


def test_every_principal_is_scram_with_literal_allow_acls_only(users: list[Resource]) -> None:
    names = {u["metadata"]["name"] for u in users}
    assert names == {f"interlock-{s}" for s in SERVICES} | {EXAMPLE_PRODUCER}
    for user in users:
        assert user["metadata"]["labels"]["strimzi.io/cluster"] == "interlock"
        assert user["spec"]["authentication"] == {"type": "scram-sha-512"}
    for grant in grants_of(users):
        # A prefix or wildcard would reach topics added later; every grant names one resource.
        assert grant.pattern == "literal" and "*" not in grant.name, grant
        assert grant.operation in {"Read", "Write"}, grant


def test_the_rendered_users_are_the_file_the_broker_test_applies(users: list[Resource]) -> None:
    assert set(grants_of(users)) == set(grants_of(source_users()))


def test_each_topic_is_written_and_read_by_exactly_whom_the_policy_names(
    users: list[Resource],
) -> None:
    grants = grants_of(users)
    topics = set(Topics().all())
    assert set(WRITERS) == topics == set(READERS)
    writes, reads = by_topic(grants, "Write"), by_topic(grants, "Read")
    assert set(writes) | set(reads) <= topics, "an ACL names a topic Interlock does not have"
    assert {t: writes.get(t, set()) for t in topics} == WRITERS
    assert {t: reads.get(t, set()) for t in topics} == READERS


def test_only_the_gateway_and_declared_producers_write_decisions_and_the_sandbox_no_control(
    users: list[Resource],
) -> None:
    """The finding of issue 31: agent code (the sandbox) could approve anything by writing
    decision.submitted. Its principal may neither write nor read a control topic."""
    grants = grants_of(users)
    for grant in grants:
        if grant.name in CONTROL_TOPICS and grant.operation == "Write":
            assert short(grant.user) in {"gateway", EXAMPLE_PRODUCER}, grant
    sandbox = {(g.resource, g.name, g.operation) for g in grants if g.user == "interlock-sandbox"}
    assert sandbox == {
        ("topic", "execution.dispatched", "Read"),
        ("group", "interlock.sandbox", "Read"),
        ("topic", "execution.suspended", "Write"),
        ("topic", "execution.reported", "Write"),
        ("topic", "execution.activity", "Write"),
        ("topic", "execution.dead_lettered", "Write"),
    }


def test_each_consumer_reads_its_own_group_only(users: list[Resource]) -> None:
    groups = {(short(g.user), g.name) for g in grants_of(users) if g.resource == "group"}
    assert groups == {(s, f"interlock.{s}") for s in ("orchestrator", "sandbox", "notifier")}


def test_the_only_listener_is_tls_with_scram_and_the_broker_authorizes(prod: Manifests) -> None:
    (kafka,) = prod.of_kind("Kafka")
    (listener,) = kafka["spec"]["kafka"]["listeners"]
    assert listener["tls"] is True
    assert listener["authentication"] == {"type": "scram-sha-512"}
    assert kafka["spec"]["kafka"]["authorization"]["type"] == "simple"
    assert not kafka["spec"]["kafka"]["authorization"].get("superUsers")
    assert "userOperator" in kafka["spec"]["entityOperator"]


def test_each_service_connects_as_its_own_principal_over_tls(prod: Manifests) -> None:
    (kafka,) = prod.of_kind("Kafka")
    (listener,) = kafka["spec"]["kafka"]["listeners"]
    cluster = kafka["metadata"]["name"]
    for service in SERVICES:
        pod = prod.interlock_pod(service)
        (container,) = pod.containers(init=False)
        env = prod.environment(container)
        assert env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]["value"] == (
            f"{cluster}-kafka-bootstrap:{listener['port']}"
        )
        assert env["INTERLOCK_KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
        assert env["INTERLOCK_KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
        assert env["INTERLOCK_KAFKA_SASL_USERNAME"]["value"] == f"interlock-{service}"
        # The password Strimzi's user operator writes for that KafkaUser.
        assert env["INTERLOCK_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": f"interlock-{service}",
            "key": "password",
        }
        # The brokers' certificates are checked against Strimzi's cluster CA.
        ca_file = env["INTERLOCK_KAFKA_SSL_CAFILE"]["value"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod.spec["volumes"]}
        (name,) = [n for n, path in mounts.items() if ca_file.startswith(path + "/")]
        assert volumes[name]["secret"]["secretName"] == f"{cluster}-cluster-ca-cert"
        assert volumes[name]["secret"]["items"] == [
            {"key": "ca.crt", "path": ca_file.rsplit("/", 1)[1]}
        ]


def test_keda_reads_the_lag_as_the_service_it_scales(prod: Manifests) -> None:
    (kafka,) = prod.of_kind("Kafka")
    (listener,) = kafka["spec"]["kafka"]["listeners"]
    authentications = {a["metadata"]["name"]: a for a in prod.of_kind("TriggerAuthentication")}
    for scaled in prod.of_kind("ScaledObject"):
        service = short(scaled["spec"]["scaleTargetRef"]["name"])
        (trigger,) = scaled["spec"]["triggers"]
        metadata = trigger["metadata"]
        assert metadata["bootstrapServers"].endswith(f":{listener['port']}")
        assert (metadata["sasl"], metadata["tls"]) == ("scram_sha512", "enable")
        spec = authentications[trigger["authenticationRef"]["name"]]["spec"]
        secrets = {r["parameter"]: (r["name"], r["key"]) for r in spec["secretTargetRef"]}
        assert secrets == {
            "password": (f"interlock-{service}", "password"),
            "ca": ("interlock-cluster-ca-cert", "ca.crt"),
        }
        (username,) = spec["env"]
        assert username["parameter"] == "username"
        (container,) = prod.interlock_pod(service).containers(init=False)
        assert prod.environment(container)[username["name"]]["value"] == f"interlock-{service}"


def test_pods_reach_only_the_brokers_authenticated_port_and_mongodb(prod: Manifests) -> None:
    (kafka,) = prod.of_kind("Kafka")
    (listener,) = kafka["spec"]["kafka"]["listeners"]
    egress = prod.get("NetworkPolicy", "interlock-egress")
    rules = egress["spec"]["egress"]
    targets = {
        port["port"]: rule.get("to", [])
        for rule in rules
        for port in rule["ports"]
        if port["port"] != 53
    }
    assert set(targets) == {listener["port"], 27017}
    assert targets[listener["port"]] == [
        {
            "podSelector": {
                "matchLabels": {"strimzi.io/cluster": "interlock", "strimzi.io/kind": "Kafka"}
            }
        }
    ]
    assert targets[27017] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mongodb"}}}
    ]
