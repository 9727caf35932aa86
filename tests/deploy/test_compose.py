"""deploy/compose.yaml, read with PyYAML (no Docker engine here to run `docker compose config`):
pinned images, an init step before the services, a healthcheck on everything that others wait
for or that serves, and the settings the README's curl relies on."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from interlock.cli import ServiceName
from interlock.dev import DEV_API_KEY
from services.gateway.app import GatewaySettings
from services.notifier.app import NotifierSettings
from services.orchestrator.app import OrchestratorSettings
from services.sandbox.app import SandboxSettings
from tests.deploy.manifests import REPO, image_is_pinned

COMPOSE = REPO / "deploy" / "compose.yaml"
SERVICES = [str(name) for name in ServiceName]
SETTINGS = {
    "gateway": GatewaySettings,
    "orchestrator": OrchestratorSettings,
    "sandbox": SandboxSettings,
    "notifier": NotifierSettings,
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    assert isinstance(env, dict), "environment as a mapping, so anchors merge"
    return {key: str(value) for key, value in env.items()}


def test_images_are_pinned_and_interlock_is_built_from_the_dockerfile(
    compose: dict[str, Any],
) -> None:
    for name, service in compose["services"].items():
        image = service["image"]
        if "build" in service:
            assert service["build"] == {"context": "..", "dockerfile": "Dockerfile"}, name
            assert (COMPOSE.parent / service["build"]["context"] / "Dockerfile").is_file()
        assert image_is_pinned(image), f"{name}: {image}"
    assert compose["services"]["kafka"]["image"] == "apache/kafka:4.1.1"
    assert compose["services"]["mongo"]["image"] == "mongo:8.0"


def test_the_services_start_after_init_which_starts_after_healthy_infrastructure(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert services["init"]["depends_on"] == {
        "kafka": {"condition": "service_healthy"},
        "mongo": {"condition": "service_healthy"},
    }
    assert services["init"]["restart"] == "no"
    command = " ".join(services["init"]["entrypoint"])
    assert "interlock topics create" in command and "interlock store init" in command
    for name in SERVICES:
        assert services[name]["depends_on"] == {
            "init": {"condition": "service_completed_successfully"}
        }, name
        assert services[name]["command"] == [name], name


def test_everything_that_serves_or_is_waited_for_has_a_healthcheck(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    for name in ["kafka", "mongo", *SERVICES]:
        check = services[name].get("healthcheck")
        assert check and check["test"][0] in ("CMD", "CMD-SHELL"), name
    gateway = " ".join(services["gateway"]["healthcheck"]["test"])
    assert "127.0.0.1:8000/readyz" in gateway
    for name in ("orchestrator", "sandbox", "notifier"):
        # The image sets INTERLOCK_HEALTH_PORT=8081 (Dockerfile).
        assert "127.0.0.1:8081/readyz" in " ".join(services[name]["healthcheck"]["test"]), name
    # MongoDB is healthy once its one-member replica set has a primary (the check initiates it).
    mongo = services["mongo"]
    assert "--replSet" in mongo["command"]
    replica_set = mongo["command"][mongo["command"].index("--replSet") + 1]
    assert f"_id: '{replica_set}'" in mongo["healthcheck"]["test"][-1]
    uri = environment(services["gateway"])["INTERLOCK_MONGODB_URI"]
    assert uri.endswith(f"replicaSet={replica_set}")


def test_kafka_is_one_kraft_node_with_auto_creation_off(compose: dict[str, Any]) -> None:
    env = environment(compose["services"]["kafka"])
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    advertised = env["KAFKA_ADVERTISED_LISTENERS"].removeprefix("PLAINTEXT://")
    assert environment(compose["services"]["init"])["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"] == (
        advertised
    )


def test_the_readme_curl_works_against_it(compose: dict[str, Any]) -> None:
    """The gateway is published on loopback port 8000, in development, with the README's key."""
    gateway = compose["services"]["gateway"]
    assert gateway["ports"] == ["127.0.0.1:8000:8000"]
    env = environment(gateway)
    assert env["INTERLOCK_ENVIRONMENT"] == "development"
    assert env["INTERLOCK_DEV_API_KEY"] == DEV_API_KEY
    readme = (REPO / "README.md").read_text()
    assert DEV_API_KEY in readme
    assert "docker compose -f deploy/compose.yaml up --build" in readme
    for name in ("kafka", "mongo", "init", "orchestrator", "sandbox", "notifier"):
        assert "ports" not in compose["services"][name], f"{name} is published"


def test_every_variable_names_a_setting_of_its_service(compose: dict[str, Any]) -> None:
    for name in SERVICES:
        known = {f"INTERLOCK_{field.upper()}" for field in SETTINGS[name].model_fields}
        unknown = {key for key in environment(compose["services"][name]) if key not in known}
        assert not unknown, f"{name}: {sorted(unknown)}"


def test_interlock_containers_run_locked_down(compose: dict[str, Any]) -> None:
    for name in ["init", *SERVICES]:
        service = compose["services"][name]
        assert service["read_only"] is True, name
        assert service["tmpfs"] == ["/tmp"], name
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
    # A run in flight gets time to finish on `docker compose stop`, as in Kubernetes.
    assert compose["services"]["sandbox"]["stop_grace_period"] == "120s"
