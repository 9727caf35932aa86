"""Authenticated encryption for what must not rest in plain text: callers' custom header values
on the bus, and the gateway's page cursors.

A **keyring** comes from ``INTERLOCK_ENCRYPTION_KEYS``: comma-separated ``<key id>:<base64 of 32
random bytes>`` entries. The first key seals; every key opens, so a key is rotated by putting a
new one first and removing the old one once nothing sealed with it is in flight (a message's
token names the key that sealed it). Make a key with ``interlock keys encryption-key``.

Every token is AES-256-GCM (``cryptography``) with a random 96-bit nonce, under a key derived
per *purpose* (HKDF-SHA256), so a cursor can never be opened as a header and the other way
round. The associated data binds a token to its *context* (the execution a header travels with,
the caller a cursor was issued to): a token moved elsewhere does not open.

Without the setting, outside production, each process makes a random keyring of its own, kept
in memory only (``interlock dev`` runs every service in one process, so they share it); a
restart forgets it, so what was sealed before the restart cannot be opened afterwards.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shared.errors import InterlockError

KEY_BYTES = 32
NONCE_BYTES = 12
TOKEN_VERSION = "v1"
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


class KeyringError(InterlockError, ValueError):
    """``INTERLOCK_ENCRYPTION_KEYS`` is malformed or missing: a deployment error, reported at
    start-up (a ValueError, so settings validation reports it as such)."""


class Unsealable(InterlockError):
    """A token that does not open: altered, sealed for another purpose or context, or with a key
    this keyring does not hold (rotated out, or another process's in-memory key)."""


class Keyring:
    def __init__(self, keys: list[tuple[str, bytes]], *, ephemeral: bool = False) -> None:
        if not keys:
            raise KeyringError("a keyring needs at least one key")
        for key_id, key in keys:
            if not _KEY_ID.fullmatch(key_id):
                raise KeyringError(f"key id {key_id!r}: use 1-32 of A-Z a-z 0-9 _ -")
            if len(key) != KEY_BYTES:
                raise KeyringError(f"key {key_id!r}: {len(key)} bytes, not {KEY_BYTES}")
        if len({key_id for key_id, _ in keys}) != len(keys):
            raise KeyringError("key ids must be unique")
        self._keys = dict(keys)
        self._sealing_id = keys[0][0]
        self.ephemeral = ephemeral
        """True: a process-local key nobody else holds (see the module docstring)."""
        self._ciphers: dict[tuple[str, str], AESGCM] = {}

    @classmethod
    def parse(cls, text: str) -> Keyring:
        keys = []
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            key_id, sep, encoded = entry.partition(":")
            if not sep:
                raise KeyringError("each encryption key is <key id>:<base64 of 32 bytes>")
            try:
                key = base64.b64decode(encoded, validate=True)
            except binascii.Error:
                raise KeyringError(f"key {key_id!r} is not valid base64") from None
            keys.append((key_id, key))
        return cls(keys)

    @property
    def sealing_key_id(self) -> str:
        return self._sealing_id

    def seal(self, plaintext: bytes, *, purpose: str, context: str = "") -> str:
        """``v1.<key id>.<base64url(nonce + ciphertext)>``."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._cipher(self._sealing_id, purpose).encrypt(
            nonce, plaintext, _associated(purpose, context)
        )
        body = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"{TOKEN_VERSION}.{self._sealing_id}.{body}"

    def open(self, token: str, *, purpose: str, context: str = "") -> bytes:
        """The plaintext ``seal`` was given; raises Unsealable."""
        version, _, rest = token.partition(".")
        key_id, _, body = rest.partition(".")
        if version != TOKEN_VERSION or key_id not in self._keys:
            raise Unsealable("sealed with a key this process does not hold, or not a token")
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise Unsealable("not a sealed token") from None
        if len(raw) <= NONCE_BYTES:
            raise Unsealable("not a sealed token")
        try:
            return self._cipher(key_id, purpose).decrypt(
                raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(purpose, context)
            )
        except InvalidTag:
            raise Unsealable("altered, or sealed for another purpose or context") from None

    def _cipher(self, key_id: str, purpose: str) -> AESGCM:
        cipher = self._ciphers.get((key_id, purpose))
        if cipher is None:
            derived = HKDF(
                algorithm=hashes.SHA256(),
                length=KEY_BYTES,
                salt=None,
                info=f"interlock.{purpose}".encode(),
            ).derive(self._keys[key_id])
            cipher = self._ciphers[(key_id, purpose)] = AESGCM(derived)
        return cipher


def _associated(purpose: str, context: str) -> bytes:
    return f"{purpose}\x00{context}".encode()


def new_key_entry(key_id: str | None = None) -> str:
    """A fresh ``<key id>:<base64>`` entry for ``INTERLOCK_ENCRYPTION_KEYS``."""
    key_id = key_id or secrets.token_hex(4)
    return f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


@functools.cache
def process_keyring() -> Keyring:
    """The in-memory keyring of this process, for development and tests without the setting."""
    key_id = "mem-" + secrets.token_hex(4)
    return Keyring([(key_id, secrets.token_bytes(KEY_BYTES))], ephemeral=True)


def keyring_from(encryption_keys: str | None) -> Keyring:
    return process_keyring() if encryption_keys is None else Keyring.parse(encryption_keys)
