"""What the store compresses (shared/store/mongo/compression.py): values big enough for it to
pay, never one it would not shrink, and always read back as written."""

from __future__ import annotations

import os

from shared.store.mongo import compression
from shared.store.mongo.compression import (
    MIN_COMPRESSED_BYTES,
    compressed,
    decompressed,
    loaded_typed,
    stored_typed,
)

PROSE = " ".join(f"the reviewer approved refund {n} after reading the claim" for n in range(60))


def test_a_value_big_enough_is_compressed_and_read_back_as_it_was() -> None:
    data = PROSE.encode()
    packed = compressed(data, enabled=True)
    assert packed is not None and len(packed) < len(data) / 2
    assert decompressed(packed) == data


def test_a_small_value_an_incompressible_one_and_a_disabled_writer_store_it_as_it_is() -> None:
    assert compressed(b"x" * (MIN_COMPRESSED_BYTES - 1), enabled=True) is None
    assert compressed(os.urandom(8 * MIN_COMPRESSED_BYTES), enabled=True) is None
    assert compressed(PROSE.encode(), enabled=False) is None


def test_a_compressed_serde_value_says_so_in_its_type_and_a_plain_one_is_untouched() -> None:
    typed = ("msgpack", PROSE.encode())
    stored = stored_typed(typed, enabled=True)
    assert stored[0] == "msgpack" + compression.SUFFIX and stored[1] != typed[1]
    assert loaded_typed(*stored) == typed
    assert stored_typed(typed, enabled=False) == typed
    assert loaded_typed(*typed) == typed
