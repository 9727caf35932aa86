"""The keyring that seals custom headers and cursors (shared/crypto.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.crypto import Keyring, KeyringError, Unsealable, new_key_entry, process_keyring
from shared.settings import CommonSettings


def test_a_token_opens_only_for_its_purpose_and_context() -> None:
    keyring = Keyring.parse(new_key_entry("k1"))
    token = keyring.seal(b"secret", purpose="headers", context="exec-1")
    assert token.startswith("v1.k1.") and b"secret" not in token.encode()
    assert keyring.open(token, purpose="headers", context="exec-1") == b"secret"
    for purpose, context in (("headers", "exec-2"), ("cursor", "exec-1")):
        with pytest.raises(Unsealable):
            keyring.open(token, purpose=purpose, context=context)


def test_the_same_plaintext_seals_differently_each_time() -> None:
    keyring = Keyring.parse(new_key_entry())
    assert keyring.seal(b"x", purpose="p") != keyring.seal(b"x", purpose="p")


def test_rotation_seals_with_the_first_key_and_opens_with_any() -> None:
    old, new = new_key_entry("old"), new_key_entry("new")
    sealed_before = Keyring.parse(old).seal(b"in flight", purpose="headers")
    rotated = Keyring.parse(f"{new},{old}")
    assert rotated.open(sealed_before, purpose="headers") == b"in flight"
    assert rotated.seal(b"x", purpose="headers").startswith("v1.new.")
    with pytest.raises(Unsealable):
        Keyring.parse(new).open(sealed_before, purpose="headers")  # the old key was removed


@pytest.mark.parametrize(
    "token",
    ["", "v1", "v2.k1.AAAA", "v1.k1.", "v1.k1.!!!", "v1.k1.AAAAAAAAAAAAAAAA", "v1.zz.AAAA"],
)
def test_malformed_tokens_are_unsealable(token: str) -> None:
    with pytest.raises(Unsealable):
        Keyring.parse(new_key_entry("k1")).open(token, purpose="p")


def test_a_flipped_bit_is_unsealable() -> None:
    keyring = Keyring.parse(new_key_entry("k1"))
    token = keyring.seal(b"value", purpose="p")
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    with pytest.raises(Unsealable):
        keyring.open(flipped, purpose="p")


@pytest.mark.parametrize(
    "text", ["nokey", "k1:not-base64!", "k1:AAAA", "bad id:" + "A" * 44, "", " , "]
)
def test_malformed_settings_are_refused_at_start_up(text: str) -> None:
    with pytest.raises(KeyringError):
        Keyring.parse(text)
    with pytest.raises(ValidationError):
        CommonSettings(encryption_keys=text)


def test_duplicate_key_ids_are_refused() -> None:
    entry = new_key_entry("same")
    with pytest.raises(KeyringError, match="unique"):
        Keyring.parse(f"{entry},{new_key_entry('same')}")


def test_production_requires_keys_and_elsewhere_a_process_key_stands_in() -> None:
    with pytest.raises(KeyringError, match="required in production"):
        _ = CommonSettings(environment="production").keyring
    development = CommonSettings().keyring
    assert development is process_keyring() and development.ephemeral
    configured = CommonSettings(environment="production", encryption_keys=new_key_entry("k9"))
    assert configured.keyring.sealing_key_id == "k9" and not configured.keyring.ephemeral
