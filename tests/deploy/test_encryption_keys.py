"""The gateway seals callers' custom headers and the sandbox opens them: wherever Interlock is
deployed, both must get the same ``INTERLOCK_ENCRYPTION_KEYS``, and nothing else needs it."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from shared.crypto import Keyring
from tests.deploy.manifests import REPO, Manifests

HOLDERS = ("gateway", "sandbox")
OTHERS = ("orchestrator", "notifier")
SETTING = "INTERLOCK_ENCRYPTION_KEYS"


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_the_gateway_and_the_sandbox_read_the_same_secret_key(
    overlay: str, rendered: dict[str, Manifests]
) -> None:
    manifests = rendered[overlay]
    refs = []
    for component in HOLDERS:
        (container,) = manifests.interlock_pod(component).containers(init=False)
        entry = manifests.environment(container)[SETTING]
        refs.append(entry["valueFrom"]["secretKeyRef"])
    assert refs[0] == refs[1] and refs[0]["key"] == "encryption-keys"
    # The dev overlay generates the Secret, so kustomize appends a hash to its name.
    assert refs[0]["name"] == "interlock" or refs[0]["name"].startswith("interlock-")
    assert "optional" not in refs[0], "production refuses to start without it"
    for component in OTHERS:
        for container in manifests.interlock_pod(component).containers():
            assert SETTING not in manifests.environment(container), component


def test_the_dev_overlay_key_is_a_valid_obviously_fake_keyring(dev: Manifests) -> None:
    secret = dev.named_prefix("Secret", "interlock")
    keys = base64.b64decode(secret["data"]["encryption-keys"]).decode()
    assert Keyring.parse(keys).sealing_key_id == "dev-not-secret"


def test_compose_gives_the_gateway_and_the_sandbox_one_key() -> None:
    compose: dict[str, Any] = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())
    services = compose["services"]
    gateway, sandbox = (services[name]["environment"].get(SETTING) for name in HOLDERS)
    assert gateway is not None and gateway == sandbox
    Keyring.parse(gateway)
    for name in OTHERS:
        assert SETTING not in services[name].get("environment", {}), name
