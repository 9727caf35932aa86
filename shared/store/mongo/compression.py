"""State-sized values compressed on their way to the store, and back.

A conversation's state is its messages, so what the store moves per turn grows with the
conversation: the checkpoint the turn starts from, the one it writes, the execution that holds
the final values. FerretDB's time per command grows with the document's bytes (docs/
benchmarks.md, section 13), so the sandbox's checkpoints and pending writes and an execution's
body are stored compressed once they are big enough for it to pay.

zlib at level 1 (the standard library; any MongoDB client can read it back): on a conversation
of English prose, 57 KB of serialized state is 3.3x smaller in 0.3 ms and read back in 0.08 ms,
where level 6 gains 15% more for 4x the time. Below ``MIN_COMPRESSED_BYTES`` a value is stored
as it is (it would barely shrink), and so is one that compression does not make smaller
(images, already-compressed blobs).

What is compressed is marked where a reader of a release before this one fails loudly rather
than misreading it: a checkpoint's serde type gains ``+zlib`` (LangGraph's serializer refuses an
unknown type), an execution's body moves to ``body_zlib``. Readers of this release read both
forms; ``INTERLOCK_STORE_COMPRESSION=false`` makes writers keep the plain one, for a rolling
upgrade from a release before it (docs/architecture.md, "Upgrading to compressed state").
"""

from __future__ import annotations

import zlib

MIN_COMPRESSED_BYTES = 1024
LEVEL = 1
SUFFIX = "+zlib"


def compressed(data: bytes, *, enabled: bool) -> bytes | None:
    """``data`` compressed, or None where it is to be stored as it is."""
    if not enabled or len(data) < MIN_COMPRESSED_BYTES:
        return None
    packed = zlib.compress(data, LEVEL)
    return packed if len(packed) < len(data) else None


def decompressed(data: bytes) -> bytes:
    return zlib.decompress(data)


def stored_typed(typed: tuple[str, bytes], *, enabled: bool) -> tuple[str, bytes]:
    """A serde's ``(type, bytes)`` as stored: compressed ones say so in their type."""
    packed = compressed(typed[1], enabled=enabled)
    return typed if packed is None else (typed[0] + SUFFIX, packed)


def loaded_typed(type_: str, data: bytes) -> tuple[str, bytes]:
    """What ``stored_typed`` stored, as the serde wrote it."""
    if type_.endswith(SUFFIX):
        return type_[: -len(SUFFIX)], decompressed(data)
    return type_, data
