"""Signatures on the bus's control messages (shared/senders.py): who verifies as whom, what is
refused, and which settings production will not start with."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.gateway.app import GatewaySettings
from services.orchestrator.app import OrchestratorSettings
from shared.senders import (
    SIGNATURE_HEADER,
    SIGNER_HEADER,
    GatewaySender,
    MessageSigner,
    ProducerSender,
    SenderCheck,
    SigningKeyError,
    Unverified,
    gateway_public_keys,
    gateway_signer,
    load_producers,
    new_key_pair,
)
from shared.store.api_keys import Role
from tests import factories as f

BODY = b'{"type":"decision.submitted","execution_id":"e1"}'


def check_for(private_public: tuple[str, str], producers: Path | None = None) -> SenderCheck:
    return SenderCheck(
        gateway_public_keys(f"k1:{private_public[1]}", environment="production"),
        load_producers(producers),
    )


def test_the_gateways_signature_verifies_as_the_gateway_and_nothing_else_does() -> None:
    pair = new_key_pair()
    signer = gateway_signer(f"k1:{pair[0]}", environment="production")
    check = check_for(pair)
    headers = signer.headers(BODY)
    assert headers[SIGNER_HEADER] == "gateway:k1"
    assert check.sender_of(BODY, headers) == GatewaySender("k1")
    # One byte more, another key, no headers, an unknown signer: nobody.
    assert isinstance(check.sender_of(BODY + b" ", headers), Unverified)
    other = gateway_signer(f"k1:{new_key_pair()[0]}", environment="production")
    assert isinstance(check.sender_of(BODY, other.headers(BODY)), Unverified)
    assert "not signed" in check.sender_of(BODY, {}).reason  # type: ignore[union-attr]
    unknown = {**headers, SIGNER_HEADER: "gateway:k2"}
    assert "not a registered signer" in check.sender_of(BODY, unknown).reason  # type: ignore[union-attr]
    garbage = {**headers, SIGNATURE_HEADER: "!!!"}
    assert isinstance(check.sender_of(BODY, garbage), Unverified)


def test_a_registered_producer_verifies_with_its_role_and_scope(tmp_path: Path) -> None:
    path, signer = f.outside_producer(tmp_path, name="billing", role="PROJECT_OWNER")
    check = check_for(new_key_pair(), path)
    sender = check.sender_of(BODY, signer.headers(BODY))
    assert sender == ProducerSender("billing", Role.OWNER, ("demo",), None)
    assert isinstance(sender, ProducerSender)
    assert sender.identity == "system:billing" and sender.label == "producer:billing"
    assert sender.may_act_in("demo", "any") and not sender.may_act_in("other", "any")


def test_a_producer_cannot_pass_for_the_gateway(tmp_path: Path) -> None:
    path, signer = f.outside_producer(tmp_path, name="billing")
    check = check_for(new_key_pair(), path)
    posing = MessageSigner("gateway:k1", signer._key)
    assert isinstance(check.sender_of(BODY, posing.headers(BODY)), Unverified)


OWNER_OF_P = 'role = "PROJECT_OWNER"\nprojects = ["p"]'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f'[producers.gateway-x]\npublic_key = "{{key}}"\n{OWNER_OF_P}', "not starting with"),
        ('[producers.b]\npublic_key = "{key}"\nrole = "ADMIN"\nprojects = ["p"]', "role"),
        ('[producers.b]\npublic_key = "{key}"\nrole = "PROJECT_OWNER"\nprojects = []', "projects"),
        (f'[producers.b]\npublic_key = "{{key}}"\n{OWNER_OF_P}\nextra = 1', "extra"),
        ('[producer.b]\npublic_key = "{key}"', "unknown tables"),
        (f'[producers.b]\npublic_key = "AAAA{{key}}"\n{OWNER_OF_P}', "bytes"),
        ("[producers.b", "producers file"),
    ],
)
def test_a_malformed_producers_file_stops_the_start(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "producers.toml"
    path.write_text(text.replace("{key}", new_key_pair()[1]))
    with pytest.raises(SigningKeyError, match=message):
        load_producers(path)


def test_production_needs_real_keys_and_development_has_one_pair() -> None:
    with pytest.raises(ValueError, match="INTERLOCK_DECISION_SIGNING_KEY is required"):
        GatewaySettings(environment="production", encryption_keys=None)
    with pytest.raises(ValueError, match="INTERLOCK_DECISION_VERIFY_KEYS is required"):
        OrchestratorSettings(environment="production")
    with pytest.raises(ValueError, match="development decision signing key is refused"):
        gateway_signer("development:" + "A" * 43, environment="production")
    development = gateway_signer(None, environment="development")
    check = SenderCheck(gateway_public_keys(None, environment="development"))
    assert check.sender_of(BODY, development.headers(BODY)) == GatewaySender("development")
    with pytest.raises(ValueError, match="base64 of 32 bytes"):
        GatewaySettings(decision_signing_key="no-colon")
    with pytest.raises(ValueError, match="twice"):
        pair = new_key_pair()
        gateway_public_keys(f"a:{pair[1]},a:{pair[1]}", environment="test")


def test_the_cli_makes_a_decision_key_pair_and_a_producer_registration(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from interlock.cli import app

    pair = CliRunner().invoke(app, ["keys", "decision-key", "--key-id", "gw2"])
    assert pair.exit_code == 0, pair.output
    settings = dict(line.split("=", 1) for line in pair.stdout.splitlines())
    signer = gateway_signer(settings["INTERLOCK_DECISION_SIGNING_KEY"], environment="production")
    keys = gateway_public_keys(settings["INTERLOCK_DECISION_VERIFY_KEYS"], environment="production")
    assert SenderCheck(keys).sender_of(BODY, signer.headers(BODY)) == GatewaySender("gw2")
    bad = CliRunner().invoke(app, ["keys", "decision-key", "--key-id", "no spaces"])
    assert bad.exit_code == 2 and "key id" in bad.output

    made = CliRunner().invoke(
        app, ["keys", "producer-key", "billing", "--project", "acme", "--role", "PROJECT_MEMBER"]
    )
    assert made.exit_code == 0, made.output
    path = tmp_path / "producers.toml"
    path.write_text(made.stdout)
    private = made.stderr.rsplit(": ", 1)[1].strip()
    producer = MessageSigner.for_producer("billing", private)
    sender = SenderCheck({}, load_producers(path)).sender_of(BODY, producer.headers(BODY))
    assert sender == ProducerSender("billing", Role.MEMBER, ("acme",), None)


def test_interlock_dev_trusts_its_own_signing_key_without_a_verify_setting(
    tmp_path: Path,
) -> None:
    from interlock.dev import DevSettings

    private, _ = new_key_pair()
    settings = DevSettings(data_dir=tmp_path, decision_signing_key=f"mine:{private}")
    signed = settings.decision_signer.headers(BODY)
    assert settings.sender_check.sender_of(BODY, signed) == GatewaySender("mine")
    plain = DevSettings(data_dir=tmp_path)
    assert plain.sender_check.sender_of(BODY, plain.decision_signer.headers(BODY)) == (
        GatewaySender("development")
    )
