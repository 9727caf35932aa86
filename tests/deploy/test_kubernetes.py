"""The Kubernetes overlays, as `kustomize build` renders them: valid against the Kubernetes API
schemas (and the operators' CRDs, structurally), and true to how Interlock runs: its settings,
topics, consumer groups, health ports, security posture and scaling limits."""

from __future__ import annotations

import base64
import importlib
import json
import re
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import jsonschema
import kubernetes_validate
import pytest
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError
from pydantic_settings import BaseSettings

from interlock.cli import ServiceName
from services.gateway.app import GatewaySettings
from services.notifier.app import NotifierSettings
from services.orchestrator.app import OrchestratorSettings
from services.sandbox.app import SandboxSettings
from shared.agents import load_registry
from shared.notifications.config import NotificationsFile
from shared.settings import CommonSettings
from shared.store.access import DEVELOPMENT_GRANTS, PRINCIPALS, roles_document, user_of
from shared.topics import Topics
from tests.deploy import crds
from tests.deploy.dockerfile import final_stage_user
from tests.deploy.manifests import REPO, Manifests, Pod, Resource, image_is_pinned, is_subset

# The first run builds kustomize from its Go module (deploy/tools.sh), inside the first test.
pytestmark = pytest.mark.timeout(900)

# The oldest Kubernetes release the manifests claim, and the newest kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.32", "1.37")

SETTINGS: dict[str, type[BaseSettings]] = {
    ServiceName.GATEWAY: GatewaySettings,
    ServiceName.ORCHESTRATOR: OrchestratorSettings,
    ServiceName.SANDBOX: SandboxSettings,
    ServiceName.NOTIFIER: NotifierSettings,
}
CONSUMERS = (ServiceName.ORCHESTRATOR, ServiceName.SANDBOX, ServiceName.NOTIFIER)
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|TOKEN|API_KEY|MONGODB_URI|CREDENTIALS)", re.I)
# Secrets the prod overlay expects to exist (deploy/README.md says how to create them).
PROD_SECRETS = {
    "interlock": {
        "mongodb-uri-gateway",
        "mongodb-uri-orchestrator",
        "mongodb-uri-sandbox",
        "mongodb-uri-notifier",
        "mongodb-uri-migrator",
        "action-link-secret",
        "run-webhook-secrets",
        "encryption-keys",
        "decision-signing-key",
        "decision-verify-keys",
    },
    "mongodb": {"root-password", "keyfile"} | {f"{p}-password" for p in PRINCIPALS},
    # Written by Strimzi, not by the operator: each KafkaUser's password and the cluster CA.
    **{f"interlock-{s}": {"password"} for s in ServiceName},
    "interlock-cluster-ca-cert": {"ca.crt"},
}


def setting_names(settings: type[BaseSettings]) -> set[str]:
    return {f"INTERLOCK_{name.upper()}" for name in settings.model_fields}


GENERATED_SUFFIX = re.compile(r"-[a-z0-9]{10}$")
"""The content hash kustomize appends to the name of a Secret it generates (dev)."""


def secret_key_of(entry: Resource) -> tuple[str, str]:
    """(Secret, key) of a variable taken from a Secret, the Secret's generated suffix dropped."""
    ref = entry["valueFrom"]["secretKeyRef"]
    return GENERATED_SUFFIX.sub("", ref["name"]), ref["key"]


def settings_config_map(manifests: Manifests) -> dict[str, str]:
    data: dict[str, str] = manifests.named_prefix("ConfigMap", "interlock-settings")["data"]
    return data


# ---------------------------------------------------------------- schemas


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_every_resource_validates_against_its_schema(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    """Kubernetes' own kinds against the API's JSON schemas (strict: unknown fields fail), in
    the oldest and newest release supported; the operators' kinds against crds.py."""
    for resource in rendered[overlay].resources:
        where = f"{overlay}: {resource['kind']}/{resource['metadata']['name']}"
        custom = crds.BY_KIND.get((resource["apiVersion"], resource["kind"]))
        if custom is not None:
            try:
                jsonschema.validate(resource, custom)
            except jsonschema.ValidationError as exc:
                pytest.fail(f"{where}: {'.'.join(map(str, exc.absolute_path))}: {exc.message}")
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except SchemaNotFoundError:
                pytest.fail(f"{where}: no schema (a custom resource? add it to crds.py)")
            except ValidationError as exc:
                path = ".".join(map(str, exc.path))
                pytest.fail(f"{where} (Kubernetes {version}): {path}: {exc.message}")


def test_the_schema_check_rejects_a_misspelt_field() -> None:
    """The strict schemas do catch the mistakes this suite relies on them for."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "replica": 2,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "x", "image": "x:1"}]},
            },
        },
    }
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "x"},
        "spec": {
            "scaleTargetRef": {"name": "x"},
            "triggers": [
                {
                    "type": "kafka",
                    "metadata": {
                        "bootstrapServers": "k:9092",
                        "consumerGroup": "g",
                        "lagTreshold": "5",
                    },
                }
            ],
        },
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, crds.SCALED_OBJECT)


# ---------------------------------------------------------------- pods (both overlays)


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_every_pod_meets_the_restricted_pod_security_standard(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    """The dev namespace enforces "restricted"; prod warns on it (Strimzi's pods are enforced at
    baseline only), so Interlock's and MongoDB's pods meet it in both."""
    for pod in rendered[overlay].pods():
        spec = pod.spec
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), pod
        assert all("hostPath" not in v for v in spec.get("volumes", [])), pod
        pod_security = spec.get("securityContext", {})
        assert pod_security.get("seccompProfile", {}).get("type") == "RuntimeDefault", pod
        for container in pod.containers():
            security = container.get("securityContext", {})
            where = f"{pod}: {container['name']}"
            assert security.get("runAsNonRoot", pod_security.get("runAsNonRoot")) is True, where
            assert security.get("runAsUser", pod_security.get("runAsUser")) != 0, where
            assert security.get("allowPrivilegeEscalation") is False, where
            assert security.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not security.get("capabilities", {}).get("add"), where
            assert not security.get("privileged"), where


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_pods_get_no_service_links_and_no_api_token(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    """Service links would inject variables such as INTERLOCK_GATEWAY_PORT=tcp://... (or
    KAFKA_PORT for the Kafka image) into settings read from the environment; and no pod talks to
    the Kubernetes API."""
    for pod in rendered[overlay].pods():
        assert pod.spec.get("enableServiceLinks") is False, pod
        assert pod.spec.get("automountServiceAccountToken") is False, pod


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_services_run_their_command_with_settings_the_service_knows(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    """Every INTERLOCK_* variable names a setting: a misspelt one would be ignored silently
    (pydantic-settings drops unknown variables). A container's own variables must be settings of
    its service; the shared ConfigMap's, settings of at least one service."""
    manifests = rendered[overlay]
    for service, settings in SETTINGS.items():
        pod = manifests.interlock_pod(service)
        (container,) = pod.containers(init=False)
        assert container["args"] == [str(service)], pod
        assert "command" not in container, f"{pod}: the image's entrypoint runs the service"
        unknown = {
            entry["name"]
            for entry in container.get("env", [])
            if entry["name"].startswith("INTERLOCK_")
            and entry["name"] not in setting_names(settings)
        }
        assert not unknown, f"{pod}: not settings of {service}: {sorted(unknown)}"
    known = set().union(*(setting_names(settings) for settings in SETTINGS.values()))
    unknown = set(settings_config_map(manifests)) - known
    assert not unknown, f"interlock-settings: not settings of any service: {sorted(unknown)}"


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_consumers_are_static_group_members_named_after_their_pod(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    """A pod's name is unique among live replicas and survives a container restart: the two
    things a static member name must be (shared/settings.py, kafka_group_instance_id)."""
    for service in ("orchestrator", "sandbox", "notifier"):
        (container,) = rendered[overlay].interlock_pod(service).containers(init=False)
        env = {entry["name"]: entry for entry in container.get("env", [])}
        entry = env.get("INTERLOCK_KAFKA_GROUP_INSTANCE_ID")
        assert entry is not None, f"{service}: no static member name"
        assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}, entry
    (gateway,) = rendered[overlay].interlock_pod("gateway").containers(init=False)
    assert "INTERLOCK_KAFKA_GROUP_INSTANCE_ID" not in {e["name"] for e in gateway.get("env", [])}


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_probes_point_at_the_port_the_service_serves_them_on(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    manifests = rendered[overlay]
    for service in SETTINGS:
        pod = manifests.interlock_pod(service)
        (container,) = pod.containers(init=False)
        env = manifests.environment(container)
        port_setting = (
            "INTERLOCK_PORT" if service == ServiceName.GATEWAY else "INTERLOCK_HEALTH_PORT"
        )
        port = int(env[port_setting]["value"])
        if service != ServiceName.GATEWAY:
            # The health server listens on loopback unless told otherwise; the kubelet probes
            # the pod's address.
            assert env["INTERLOCK_HEALTH_HOST"]["value"] == "0.0.0.0", pod
        else:
            assert env["INTERLOCK_HOST"]["value"] == "0.0.0.0", pod
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for probe, path in (
            ("startupProbe", "/healthz"),
            ("livenessProbe", "/healthz"),
            ("readinessProbe", "/readyz"),
        ):
            http = container[probe]["httpGet"]
            assert http["path"] == path, f"{pod}: {probe}"
            assert ports[http["port"]] == port, f"{pod}: {probe} port"


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_services_wait_for_the_store_and_create_its_indexes_first(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    """kubectl apply has no ordering, so each pod runs the idempotent `interlock store init`
    before its service starts (and it retries until MongoDB answers), as the migrator; the
    service itself then does not (its user may not)."""
    manifests = rendered[overlay]
    for service in SETTINGS:
        pod = manifests.interlock_pod(service)
        (init,) = pod.spec["initContainers"]
        assert init["command"] == ["interlock", "store", "init"], pod
        (container,) = pod.containers(init=False)
        assert init["image"] == container["image"], pod
        uri = manifests.environment(init)["INTERLOCK_MONGODB_URI"]
        assert secret_key_of(uri) == ("interlock", "mongodb-uri-migrator"), pod
        assert manifests.environment(container)["INTERLOCK_STORE_INIT_AT_START"] == {
            "value": "false"
        }, pod


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_agents_and_notifications_files_are_mounted_read_only_and_load(
    rendered: dict[str, Manifests], overlay: str, tmp_path: Path
) -> None:
    manifests = rendered[overlay]
    for service in SETTINGS:
        pod = manifests.interlock_pod(service)
        (container,) = pod.containers(init=False)
        env = manifests.environment(container)
        files = {"INTERLOCK_AGENTS_FILE": "interlock-agents"}
        if service == ServiceName.NOTIFIER:
            files["INTERLOCK_NOTIFICATIONS_FILE"] = "interlock-notifications"
        for setting, config_map_prefix in files.items():
            path = Path(env[setting]["value"])
            (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(path.parent)]
            assert mount.get("readOnly") is True, f"{pod}: {setting}"
            (volume,) = [v for v in pod.spec["volumes"] if v["name"] == mount["name"]]
            config_map = manifests.get("ConfigMap", volume["configMap"]["name"])
            assert config_map["metadata"]["name"].startswith(config_map_prefix)
            assert path.name in config_map["data"], f"{pod}: {setting}"

    # The files themselves: the registry loads and each factory imports, as the sandbox does.
    agents = manifests.named_prefix("ConfigMap", "interlock-agents")["data"]["agents.toml"]
    (tmp_path / "agents.toml").write_text(agents)
    registry = load_registry(tmp_path / "agents.toml")
    assert registry.names(), "the deployed registry names no agent"
    for spec in registry.all():
        module, _, attribute = spec.factory.partition(":")
        assert callable(getattr(importlib.import_module(module), attribute)), spec.name
    notifications = manifests.named_prefix("ConfigMap", "interlock-notifications")["data"]
    NotificationsFile.model_validate(tomllib.loads(notifications["notifications.toml"]))


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_interlock_pods_run_as_the_image_user(rendered: dict[str, Manifests], overlay: str) -> None:
    uid = final_stage_user()
    for service in SETTINGS:
        pod = rendered[overlay].interlock_pod(service)
        assert pod.spec["securityContext"]["runAsUser"] == uid, pod


# ---------------------------------------------------------------- prod invariants


def test_prod_containers_have_resources_probes_and_a_read_only_root(prod: Manifests) -> None:
    for pod in prod.pods():
        for container in pod.containers():
            where = f"{pod}: {container['name']}"
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{where}: {bound}"
            security = container["securityContext"]
            assert security.get("readOnlyRootFilesystem") is True, where
            assert security.get("allowPrivilegeEscalation") is False, where
            runs_as_non_root = security.get(
                "runAsNonRoot", pod.spec["securityContext"].get("runAsNonRoot")
            )
            assert runs_as_non_root is True, where
        for container in pod.containers(init=False):
            where = f"{pod}: {container['name']}"
            assert "readinessProbe" in container, where
            # The MongoDB replica-set sidecar only idles once its work is done: nothing to check
            # for liveness (its readiness says whether the work is done).
            if container["name"] != "replset-init":
                assert "livenessProbe" in container, where


def test_prod_images_are_pinned_by_tag(prod: Manifests) -> None:
    for pod in prod.pods():
        for container in pod.containers():
            assert image_is_pinned(container["image"]), f"{pod}: {container['image']}"


def test_prod_every_workload_has_a_disruption_budget(prod: Manifests) -> None:
    budgets = prod.of_kind("PodDisruptionBudget")
    for pod in prod.pods():
        if pod.kind == "Job":
            continue
        covering = [
            b for b in budgets if is_subset(b["spec"]["selector"]["matchLabels"], pod.labels)
        ]
        assert len(covering) == 1, f"{pod}: {len(covering)} PodDisruptionBudgets"
        (budget,) = covering
        # maxUnavailable rather than minAvailable: a single replica can still be drained.
        assert budget["spec"] == {"maxUnavailable": 1, "selector": budget["spec"]["selector"]}


def test_prod_gateway_scales_on_cpu(prod: Manifests) -> None:
    (hpa,) = prod.of_kind("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "interlock-gateway",
    }
    assert hpa["spec"]["minReplicas"] >= 2
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    # The utilisation target is a share of the CPU request, which must exist.
    (container,) = prod.interlock_pod("gateway").containers(init=False)
    assert container["resources"]["requests"]["cpu"]


def test_prod_consumers_scale_on_their_consumer_group_lag_within_the_partitions(
    prod: Manifests,
) -> None:
    namespace = prod.get("Namespace", "interlock")["metadata"]["name"]
    bootstrap = settings_config_map(prod)["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
    host, _, port = bootstrap.partition(":")
    partitions = min(t["spec"]["partitions"] for t in prod.of_kind("KafkaTopic"))
    defaults = CommonSettings()
    scaled = {s["spec"]["scaleTargetRef"]["name"]: s for s in prod.of_kind("ScaledObject")}
    assert set(scaled) == {f"interlock-{service}" for service in CONSUMERS}
    for service in CONSUMERS:
        spec = scaled[f"interlock-{service}"]["spec"]
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= partitions, service
        (trigger,) = spec["triggers"]
        metadata = trigger["metadata"]
        assert metadata["consumerGroup"] == defaults.consumer_group(service)
        assert "topic" not in metadata, "the lag of every topic the group reads counts"
        # KEDA reads the lag from its own namespace: the address must name this one.
        assert metadata["bootstrapServers"] == f"{host}.{namespace}.svc:{port}", service
        assert metadata["offsetResetPolicy"] == "earliest"  # as the consumers (shared/bus.py)
    assert scaled["interlock-sandbox"]["spec"]["triggers"][0]["metadata"]["lagThreshold"] == "1"


def test_prod_autoscaled_deployments_leave_the_replica_count_to_the_autoscaler(
    prod: Manifests,
) -> None:
    """A spec.replicas in the manifest would reset the autoscaler's count on every apply."""
    for deployment in prod.of_kind("Deployment"):
        assert "replicas" not in deployment["spec"], deployment["metadata"]["name"]


def test_prod_topics_are_interlocks_replicated_three_times_two_in_sync(prod: Manifests) -> None:
    (kafka,) = prod.of_kind("Kafka")
    cluster = kafka["metadata"]["name"]
    topics = prod.of_kind("KafkaTopic")
    assert sorted(t["spec"]["topicName"] for t in topics) == sorted(Topics().all())
    partitions = int(settings_config_map(prod)["INTERLOCK_TOPIC_PARTITIONS"])
    for topic in topics:
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == cluster
        assert topic["spec"]["partitions"] == partitions, topic["spec"]["topicName"]
        assert topic["spec"]["replicas"] == 3, topic["spec"]["topicName"]
        assert topic["spec"]["config"]["min.insync.replicas"] == 2, topic["spec"]["topicName"]
    config = kafka["spec"]["kafka"]["config"]
    assert config["auto.create.topics.enable"] is False
    assert config["min.insync.replicas"] == 2
    assert config["default.replication.factor"] == 3
    (pool,) = prod.of_kind("KafkaNodePool")
    assert pool["metadata"]["labels"]["strimzi.io/cluster"] == cluster
    assert pool["spec"]["replicas"] >= 3
    assert settings_config_map(prod)["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"] == (
        f"{cluster}-kafka-bootstrap:9093"
    )


def test_prod_has_no_secret_and_takes_every_credential_from_secret_refs(prod: Manifests) -> None:
    assert prod.of_kind("Secret") == []
    assert settings_config_map(prod)["INTERLOCK_ENVIRONMENT"] == "production"
    referenced: dict[str, set[str]] = {}
    for pod in prod.pods():
        for container in pod.containers():
            for name, entry in prod.environment(container).items():
                assert name != "INTERLOCK_DEV_API_KEY", f"{pod}: the development key"
                if SECRET_NAME.search(name):
                    assert "secretKeyRef" in entry.get("valueFrom", {}), f"{pod}: {name} literal"
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    referenced.setdefault(ref["name"], set()).add(ref["key"])
        for volume in pod.spec.get("volumes", []):
            if "secret" in volume:
                secret = volume["secret"]
                referenced.setdefault(secret["secretName"], set()).update(
                    item["key"] for item in secret.get("items", [])
                )
    # Exactly the Secrets deploy/README.md tells operators to create.
    assert referenced == PROD_SECRETS


MONITORING_NAMESPACE = {"kubernetes.io/metadata.name": "monitoring"}
HEALTH_PORT = 8081


def test_prod_network_policies_deny_by_default_and_open_only_what_is_used(
    prod: Manifests,
) -> None:
    policies = prod.of_kind("NetworkPolicy")
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and "ingress" not in p["spec"]]
    assert deny and deny[0]["spec"]["policyTypes"] == ["Ingress"]

    def selecting(pod: Pod, policy_type: str) -> list[Resource]:
        return [
            p
            for p in policies
            if policy_type in p["spec"]["policyTypes"]
            and is_subset(p["spec"]["podSelector"].get("matchLabels", {}), pod.labels)
        ]

    # Interlock's pods are limited in what they reach; only the gateway accepts connections
    # from anywhere, and the health port only scrapes from the monitoring namespace.
    for service in SETTINGS:
        pod = prod.interlock_pod(service)
        assert selecting(pod, "Egress"), f"{pod}: no egress policy"
        open_to_all, scrape_only = set(), set()
        for policy in selecting(pod, "Ingress"):
            for rule in policy["spec"].get("ingress", []):
                ports = {port["port"] for port in rule.get("ports", [])}
                sources = rule.get("from", [])
                if not sources:
                    open_to_all |= ports
                else:
                    assert sources == [
                        {"namespaceSelector": {"matchLabels": MONITORING_NAMESPACE}}
                    ], f"{pod}: ingress from {sources}"
                    scrape_only |= ports
        expected = {8000} if service == ServiceName.GATEWAY else set()
        assert open_to_all == expected, f"{pod}: ingress on {open_to_all}"
        assert scrape_only == {HEALTH_PORT}, f"{pod}: scrape ingress on {scrape_only}"
    # The orchestrator reaches nothing but DNS, Kafka and MongoDB.
    (egress,) = selecting(prod.interlock_pod("orchestrator"), "Egress")
    ports = {port["port"] for rule in egress["spec"]["egress"] for port in rule["ports"]}
    assert ports == {53, 9093, 27017}  # Kafka's TLS + SCRAM listener (test_kafka_acls.py)
    # MongoDB accepts Interlock's pods and its own members.
    mongodb = prod.pod("StatefulSet", "mongodb")
    (allowed,) = [p for p in selecting(mongodb, "Ingress") if p["spec"].get("ingress")]
    sources = [peer["podSelector"]["matchLabels"] for peer in allowed["spec"]["ingress"][0]["from"]]
    assert {"app.kubernetes.io/name": "interlock"} in sources
    # Strimzi writes the Kafka listener's policy: only Interlock's pods and KEDA.
    (kafka,) = prod.of_kind("Kafka")
    (listener,) = kafka["spec"]["kafka"]["listeners"]
    assert listener["networkPolicyPeers"], "the Kafka listener is open to every pod"


def test_prod_pods_set_their_grace_period_and_the_sandbox_a_long_one(prod: Manifests) -> None:
    for pod in prod.pods():
        assert "terminationGracePeriodSeconds" in pod.spec, pod
    assert prod.interlock_pod("sandbox").spec["terminationGracePeriodSeconds"] >= 120


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_mongodb_replica_set_members_agree(rendered: dict[str, Manifests], overlay: str) -> None:
    manifests = rendered[overlay]
    statefulset = manifests.get("StatefulSet", "mongodb")
    pod = Pod(statefulset)
    containers = {c["name"]: c for c in pod.containers(init=False)}
    args = containers["mongod"]["args"]
    replica_set = args[args.index("--replSet") + 1]
    sidecar = {e["name"]: e.get("value") for e in containers["replset-init"]["env"]}
    mounted = {m["mountPath"] for m in containers["replset-init"]["volumeMounts"]}
    assert str(Path(sidecar["MONGODB_ROLES_FILE"]).parent) in mounted
    assert int(sidecar["MONGODB_REPLICAS"]) == statefulset["spec"]["replicas"]
    assert sidecar["MONGODB_REPLICA_SET"] == replica_set
    assert (
        sidecar["MONGODB_APP_DATABASE"]
        == settings_config_map(manifests)["INTERLOCK_MONGODB_DATABASE"]
    )
    service = manifests.get("Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    if overlay == "prod":
        assert statefulset["spec"]["replicas"] == 3
        return
    # dev: each generated connection string names every member, the set, and its principal's
    # user with the password the sidecar gives that user.
    secret = manifests.named_prefix("Secret", "interlock")
    passwords = manifests.named_prefix("Secret", "mongodb")
    for principal in PRINCIPALS:
        parts = urlsplit(_secret_value(secret, f"mongodb-uri-{principal}"))
        hosts = parts.netloc.rpartition("@")[2].split(",")
        assert len(hosts) == statefulset["spec"]["replicas"]
        assert parse_qs(parts.query)["replicaSet"] == [replica_set]
        assert parse_qs(parts.query)["authSource"] == [sidecar["MONGODB_APP_DATABASE"]]
        assert parts.username == user_of(principal)
        assert parts.password == _secret_value(passwords, f"{principal}-password")


SANDBOX_MUST_NOT_REACH = (
    "api_keys",
    "approvals",
    "approval_slots",
    "decision_claims",
    "spent_links",
    "notification_deliveries",
    "notification_outbox",
    "notification_claims",
    "threads",
    "store_migrations",
)
"""What agent code, should it take the sandbox over, must neither read nor write."""


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_each_service_connects_as_its_own_mongodb_user_of_the_least_privileges(
    rendered: dict[str, Manifests], overlay: str
) -> None:
    manifests = rendered[overlay]
    for service in SETTINGS:
        (container,) = manifests.interlock_pod(service).containers(init=False)
        uri = manifests.environment(container)["INTERLOCK_MONGODB_URI"]
        assert secret_key_of(uri) == ("interlock", f"mongodb-uri-{service}"), service
    # The sidecar creates a role and a user for every principal the code declares, each with a
    # password of its own, from the roles file the code renders.
    statefulset = Pod(manifests.get("StatefulSet", "mongodb"))
    sidecar = next(c for c in statefulset.containers() if c["name"] == "replset-init")
    env = {e["name"]: e for e in sidecar["env"]}
    for principal in PRINCIPALS:
        password = env[f"MONGODB_PASSWORD_{principal.upper()}"]
        assert secret_key_of(password) == ("mongodb", f"{principal}-password")
    scripts = manifests.named_prefix("ConfigMap", "mongodb-scripts")["data"]
    roles = json.loads(scripts[Path(env["MONGODB_ROLES_FILE"]["value"]).name])
    assert roles == roles_document()
    sandbox = roles["principals"]["sandbox"]
    reached = set(sandbox["privileges"]) | set(sandbox["development_privileges"])
    assert reached.isdisjoint(SANDBOX_MUST_NOT_REACH), reached & set(SANDBOX_MUST_NOT_REACH)
    # Only a development deployment widens a role (the gateway stores the development key).
    development = env.get("MONGODB_DEVELOPMENT_GRANTS", {}).get("value") == "true"
    assert development == (overlay == "dev")
    assert set(DEVELOPMENT_GRANTS) == {"gateway"}


# ---------------------------------------------------------------- dev


def _secret_value(secret: Resource, key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def test_dev_runs_in_development_with_the_well_known_key_and_fake_secrets(dev: Manifests) -> None:
    from interlock.dev import DEV_API_KEY

    assert settings_config_map(dev)["INTERLOCK_ENVIRONMENT"] == "development"
    (gateway,) = dev.interlock_pod("gateway").containers(init=False)
    assert dev.environment(gateway)["INTERLOCK_DEV_API_KEY"]["value"] == DEV_API_KEY
    for secret in dev.of_kind("Secret"):
        for key in secret["data"]:
            value = _secret_value(secret, key)
            assert re.search(r"dev.*not.?secret", value, re.I), f"{key}: not obviously fake"


def test_dev_creates_the_topics_on_its_one_broker(dev: Manifests) -> None:
    job = dev.pod("Job", "interlock-topics")
    (container,) = job.containers()
    assert container["command"] == ["interlock", "topics", "create", "--replication-factor", "1"]
    kafka = dev.get("StatefulSet", "kafka")
    env = {e["name"]: e.get("value") for e in Pod(kafka).containers()[0]["env"]}
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert kafka["spec"]["replicas"] == 1
    host = settings_config_map(dev)["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"].partition(":")[0]
    dev.get("Service", host)


def test_the_deployed_agents_are_examples_the_image_ships() -> None:
    """The deployed registry is a subset of the example registry, with the same factories."""
    deployed = load_registry(REPO / "deploy" / "k8s" / "base" / "agents.toml")
    examples = load_registry(REPO / "agents" / "agents.toml")
    for spec in deployed.all():
        example = examples.get(spec.name)
        assert example is not None and example.factory == spec.factory, spec.name
