"""The prod overlay's Kafka principals and their ACLs, read from its KafkaUsers: what the offline
checks (tests/deploy/test_kafka_acls.py) judge and the real broker (tests/e2e/test_kafka_acls.py)
enforces."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from tests.deploy.manifests import REPO, Resource

KAFKA_USERS_FILE = REPO / "deploy" / "k8s" / "overlays" / "prod" / "kafka-users.yaml"


@dataclass(frozen=True)
class Grant:
    """One operation a principal is allowed on one resource (a topic or a consumer group)."""

    user: str
    resource: str
    name: str
    pattern: str
    operation: str


def grants_of(users: list[Resource]) -> list[Grant]:
    found = []
    for user in users:
        for acl in user["spec"]["authorization"]["acls"]:
            assert acl.get("type", "allow") == "allow", f"{user['metadata']['name']}: a deny ACL"
            resource = acl["resource"]
            for operation in acl["operations"]:
                found.append(
                    Grant(
                        user=user["metadata"]["name"],
                        resource=resource["type"],
                        name=resource["name"],
                        pattern=resource.get("patternType", "literal"),
                        operation=operation,
                    )
                )
    return found


def source_users() -> list[Resource]:
    """The KafkaUsers as written (kustomize only adds the namespace to them)."""
    return [doc for doc in yaml.safe_load_all(KAFKA_USERS_FILE.read_text()) if doc]
