"""Who sent a control message on the bus: the gateway, a registered outside producer, or
nobody Interlock knows.

A decision on ``decision.submitted`` resumes an execution, so the orchestrator never takes a
message's own word for who sent it (``reviewer``, ``approvers``, ``claimed`` are fields anyone
who can write to the topic can fill in). A sender proves itself with a signature over the
message's exact bytes, in two headers:

- ``interlock-signer``: ``gateway:<key id>`` for the gateway, the producer's name for an
  outside producer;
- ``interlock-signature``: Ed25519 (RFC 8032) over ``SIGNED_PREFIX + body``, base64url without
  padding.

Only the gateway holds the gateway's private key (``INTERLOCK_DECISION_SIGNING_KEY``); the
orchestrator holds public keys only (``INTERLOCK_DECISION_VERIFY_KEYS`` and the producers file),
so neither it nor anything else that can read its settings can sign. A decision the gateway
signed has passed the gateway's checks (role, separation of duties, quorum, revocation) and is
applied as it says. An outside producer's decision is judged by the orchestrator under the
producer's own identity and role, as an API key of that role would be; an unsigned or badly
signed one is refused and audited.

Outside production, with no keys set, every process uses one well-known development key pair
(like the development API key), so ``interlock dev`` and ``make up`` need no setting; production
refuses it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import InterlockError
from shared.store.api_keys import Role

SIGNER_HEADER = "interlock-signer"
SIGNATURE_HEADER = "interlock-signature"
SIGNED_PREFIX = b"interlock-signed-message/v1\n"
"""What a signature covers before the body: a signature made for anything else never verifies."""
GATEWAY_PREFIX = "gateway:"
DEVELOPMENT_KEY_ID = "development"
_DEVELOPMENT_SEED = hashlib.sha256(b"interlock development decision signing key").digest()
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
KEY_BYTES = 32


class SigningKeyError(InterlockError, ValueError):
    """A signing or verifying key, or the producers file, is malformed or missing: a deployment
    error reported at start-up (a ValueError, so settings validation reports it as such)."""


# --- senders -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatewaySender:
    """The gateway, which checked the decision's reviewer before it signed."""

    key_id: str


@dataclass(frozen=True)
class ProducerSender:
    """A registered outside producer: a system identity with a role and a project scope."""

    name: str
    role: Role
    projects: tuple[str, ...]
    workspaces: tuple[str, ...] | None = None
    """The workspaces it may act in; None: every workspace of its projects."""

    @property
    def identity(self) -> str:
        """Who it is for separation of duties and quorums (shared/domain/principals.py)."""
        return f"system:{self.name}"

    @property
    def label(self) -> str:
        """How the audit trail names it."""
        return f"producer:{self.name}"

    def may_act_in(self, project_id: str, workspace_id: str) -> bool:
        if project_id not in self.projects:
            return False
        return self.workspaces is None or workspace_id in self.workspaces


@dataclass(frozen=True)
class Unverified:
    """No signature Interlock can verify: nobody it knows sent this."""

    reason: str


Sender = GatewaySender | ProducerSender | Unverified


# --- keys ----------------------------------------------------------------------------------


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError) as exc:
        raise SigningKeyError(f"{what}: not base64") from exc


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _split(entry: str, what: str) -> tuple[str, bytes]:
    key_id, sep, encoded = entry.strip().partition(":")
    if not sep or not _NAME.fullmatch(key_id):
        raise SigningKeyError(
            f"{what}: expected '<key id>:<base64 of 32 bytes>', the key id 1-64 of A-Z a-z 0-9 _ -"
        )
    raw = _b64decode(encoded, f"{what} {key_id!r}")
    if len(raw) != KEY_BYTES:
        raise SigningKeyError(f"{what} {key_id!r}: {len(raw)} bytes, not {KEY_BYTES}")
    return key_id, raw


def public_key_of(raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(raw)


def public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def new_key_pair() -> tuple[str, str]:
    """A new private key and its public key, each base64url (``interlock keys``)."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes_raw()
    return _b64encode(seed), _b64encode(public_bytes(private.public_key()))


class MessageSigner:
    """Signs messages as one sender (the gateway, or an outside producer in tests and tools)."""

    def __init__(self, signer: str, private_key: Ed25519PrivateKey) -> None:
        self.signer = signer
        self._key = private_key

    @classmethod
    def for_producer(cls, name: str, private_key_b64: str) -> MessageSigner:
        """An outside producer's signer, from the private key ``interlock keys producer-key``
        printed."""
        seed = _b64decode(private_key_b64, f"producer {name!r} key")
        if len(seed) != KEY_BYTES:
            raise SigningKeyError(f"producer {name!r} key: {len(seed)} bytes, not {KEY_BYTES}")
        return cls(name, Ed25519PrivateKey.from_private_bytes(seed))

    def verify_setting(self) -> str:
        """The ``INTERLOCK_DECISION_VERIFY_KEYS`` entry that verifies this gateway signer."""
        public = _b64encode(public_bytes(self._key.public_key()))
        return f"{self.signer.removeprefix(GATEWAY_PREFIX)}:{public}"

    def headers(self, body: bytes) -> dict[str, str]:
        """The two headers that prove this sender sent ``body`` (the message's exact bytes)."""
        signature = self._key.sign(SIGNED_PREFIX + body)
        return {SIGNER_HEADER: self.signer, SIGNATURE_HEADER: _b64encode(signature)}


def _development_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(_DEVELOPMENT_SEED)


def gateway_signer(setting: str | None, *, environment: str) -> MessageSigner:
    """The gateway's signer from ``INTERLOCK_DECISION_SIGNING_KEY`` (``<key id>:<base64 seed>``);
    the development key where unset outside production."""
    if setting is None:
        if environment == "production":
            raise SigningKeyError(
                "INTERLOCK_DECISION_SIGNING_KEY is required in production (the gateway signs the"
                " decisions it publishes): make one with `interlock keys decision-key`"
            )
        return MessageSigner(GATEWAY_PREFIX + DEVELOPMENT_KEY_ID, _development_key())
    key_id, seed = _split(setting, "INTERLOCK_DECISION_SIGNING_KEY")
    if environment == "production" and (key_id == DEVELOPMENT_KEY_ID or seed == _DEVELOPMENT_SEED):
        raise SigningKeyError("the development decision signing key is refused in production")
    return MessageSigner(GATEWAY_PREFIX + key_id, Ed25519PrivateKey.from_private_bytes(seed))


def gateway_public_keys(setting: str | None, *, environment: str) -> dict[str, Ed25519PublicKey]:
    """``INTERLOCK_DECISION_VERIFY_KEYS`` (comma-separated ``<key id>:<base64 public key>``, so a
    key is rotated by adding the new one here first); the development key where unset outside
    production."""
    development = public_bytes(_development_key().public_key())
    if setting is None:
        if environment == "production":
            raise SigningKeyError(
                "INTERLOCK_DECISION_VERIFY_KEYS is required in production (the orchestrator"
                " applies only decisions the gateway or a registered producer signed)"
            )
        return {DEVELOPMENT_KEY_ID: public_key_of(development)}
    keys: dict[str, Ed25519PublicKey] = {}
    for entry in filter(str.strip, setting.split(",")):
        key_id, raw = _split(entry, "INTERLOCK_DECISION_VERIFY_KEYS")
        if environment == "production" and raw == development:
            raise SigningKeyError("the development decision key is refused in production")
        if key_id in keys:
            raise SigningKeyError(f"INTERLOCK_DECISION_VERIFY_KEYS: key id {key_id!r} twice")
        keys[key_id] = public_key_of(raw)
    if not keys:
        raise SigningKeyError("INTERLOCK_DECISION_VERIFY_KEYS holds no key")
    return keys


# --- outside producers -----------------------------------------------------------------------


class ProducerEntry(BaseModel):
    """One ``[producers.NAME]`` table of the producers file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    public_key: str = Field(min_length=40, max_length=64)
    """base64url of the producer's 32-byte Ed25519 public key (``interlock keys producer-key``)."""
    role: Role
    """What it may do, as an API key of that role could: deciding takes PROJECT_OWNER."""
    projects: list[str] = Field(min_length=1)
    workspaces: list[str] | None = None
    """The workspaces it may act in; every workspace of its projects when left out."""


def load_producers(path: Path | None) -> dict[str, tuple[ProducerSender, Ed25519PublicKey]]:
    """The outside producers registered in ``INTERLOCK_DECISION_PRODUCERS_FILE`` (TOML, one
    ``[producers.NAME]`` table each); none without the setting."""
    if path is None:
        return {}
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SigningKeyError(f"producers file {path}: {exc}") from exc
    unknown = set(document) - {"producers"}
    if unknown:
        raise SigningKeyError(f"producers file {path}: unknown tables {sorted(unknown)}")
    producers: dict[str, tuple[ProducerSender, Ed25519PublicKey]] = {}
    for name, table in document.get("producers", {}).items():
        if not _NAME.fullmatch(name) or name.startswith(GATEWAY_PREFIX.rstrip(":")):
            raise SigningKeyError(
                f"producers file {path}: producer name {name!r}: 1-64 of A-Z a-z 0-9 _ -,"
                " not starting with 'gateway'"
            )
        try:
            entry = ProducerEntry.model_validate(table)
        except ValidationError as exc:
            raise SigningKeyError(f"producers file {path}: producer {name!r}: {exc}") from exc
        raw = _b64decode(entry.public_key, f"producer {name!r} public_key")
        if len(raw) != KEY_BYTES:
            raise SigningKeyError(f"producer {name!r} public_key: {len(raw)} bytes, not 32")
        sender = ProducerSender(
            name=name,
            role=entry.role,
            projects=tuple(entry.projects),
            workspaces=None if entry.workspaces is None else tuple(entry.workspaces),
        )
        producers[name] = (sender, public_key_of(raw))
    return producers


# --- verification ------------------------------------------------------------------------------


class SenderCheck:
    """Tells who sent a message from its signature headers (pure, no I/O)."""

    def __init__(
        self,
        gateway_keys: Mapping[str, Ed25519PublicKey],
        producers: Mapping[str, tuple[ProducerSender, Ed25519PublicKey]] | None = None,
    ) -> None:
        self._keys: dict[str, tuple[Sender, Ed25519PublicKey]] = {
            GATEWAY_PREFIX + key_id: (GatewaySender(key_id), key)
            for key_id, key in gateway_keys.items()
        }
        for name, (sender, key) in (producers or {}).items():
            self._keys[name] = (sender, key)

    def sender_of(self, body: bytes, headers: Mapping[str, Any]) -> Sender:
        signer = headers.get(SIGNER_HEADER)
        signature = headers.get(SIGNATURE_HEADER)
        if signer is None or signature is None:
            return Unverified(f"no {SIGNER_HEADER} / {SIGNATURE_HEADER} headers: not signed")
        known = self._keys.get(str(signer))
        if known is None:
            return Unverified(f"signed by {str(signer)[:80]!r}, which is not a registered signer")
        sender, key = known
        try:
            key.verify(_b64decode(str(signature), "signature"), SIGNED_PREFIX + body)
        except (InvalidSignature, SigningKeyError):
            return Unverified(f"the signature of {signer!r} does not match the message")
        return sender
