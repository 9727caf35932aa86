"""The gateway signs the decisions and cancellations it publishes and the orchestrator verifies
them (shared/senders.py): wherever Interlock is deployed, the gateway alone holds the signing
key, the orchestrator alone the public keys, and nothing else (the sandbox runs agent code) holds
either."""

from __future__ import annotations

import base64

import pytest

from shared.senders import GatewaySender, SenderCheck, gateway_public_keys, gateway_signer
from tests.deploy.manifests import Manifests

SIGNING, VERIFYING = "INTERLOCK_DECISION_SIGNING_KEY", "INTERLOCK_DECISION_VERIFY_KEYS"
WHO_HOLDS = {SIGNING: "gateway", VERIFYING: "orchestrator"}
SECRET_KEY = {SIGNING: "decision-signing-key", VERIFYING: "decision-verify-keys"}
COMPONENTS = ("gateway", "orchestrator", "sandbox", "notifier")


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_only_the_gateway_signs_and_only_the_orchestrator_verifies(
    overlay: str, rendered: dict[str, Manifests]
) -> None:
    manifests = rendered[overlay]
    for setting, holder in WHO_HOLDS.items():
        for component in COMPONENTS:
            for container in manifests.interlock_pod(component).containers():
                entry = manifests.environment(container).get(setting)
                if component != holder:
                    assert entry is None, (setting, component)
                    continue
                if container in manifests.interlock_pod(component).containers(init=False):
                    assert entry is not None, (setting, component)
                    ref = entry["valueFrom"]["secretKeyRef"]
                    assert ref["key"] == SECRET_KEY[setting]
                    assert ref["name"] == "interlock" or ref["name"].startswith("interlock-")
                    assert "optional" not in ref, "production refuses to start without it"


def test_the_dev_overlay_pair_signs_and_verifies(dev: Manifests) -> None:
    data = dev.named_prefix("Secret", "interlock")["data"]
    signing = base64.b64decode(data[SECRET_KEY[SIGNING]]).decode()
    verifying = base64.b64decode(data[SECRET_KEY[VERIFYING]]).decode()
    signer = gateway_signer(signing, environment="production")  # not the built-in pair
    check = SenderCheck(gateway_public_keys(verifying, environment="production"))
    body = b'{"type":"decision.submitted"}'
    assert check.sender_of(body, signer.headers(body)) == GatewaySender("dev-not-secret")
