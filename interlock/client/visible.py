"""Invisible characters made visible, so a reviewer reads the text an agent or a user sent.

A right-to-left override (U+202E) reorders what follows it on screen ("refund $042" can read as
"refund $240"), zero-width characters hide inside words, and control characters move the cursor
or recolour the terminal. Every such character is shown as ``<U+XXXX>``, the notation the
review page uses too. Newlines and tabs stay: they are how multi-line text is laid out.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

BIDI_CONTROLS = (
    *range(0x202A, 0x202F),  # embeddings and overrides, LRE..RLO
    *range(0x2066, 0x206A),  # isolates, LRI..PDI
    0x200E,  # left-to-right mark
    0x200F,  # right-to-left mark
    0x061C,  # Arabic letter mark
)
ZERO_WIDTH = (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF)
KEPT_CONTROLS = frozenset({"\n", "\t"})


def _is_control(code: int) -> bool:
    # Category Cc is exactly C0, DEL and C1.
    return unicodedata.category(chr(code)) == "Cc" and chr(code) not in KEPT_CONTROLS


INVISIBLE = frozenset(
    [*BIDI_CONTROLS, *ZERO_WIDTH, *(code for code in range(0xA0) if _is_control(code))]
)
"""The code points that are shown escaped."""

_AS_NOTATION = {code: f"<U+{code:04X}>" for code in INVISIBLE}
_AS_JSON_ESCAPE = {code: f"\\u{code:04x}" for code in INVISIBLE}


def visible(text: str) -> str:
    """``text`` with every invisible character written as ``<U+XXXX>``."""
    return text.translate(_AS_NOTATION)


def json_text(body: Any) -> str:
    """``body`` as indented JSON that parses back to exactly ``body``: readable non-ASCII text
    as it is, but the invisible characters as ``\\uXXXX`` escapes, so that piping ``--json`` to
    a terminal shows them too. (json.dumps escapes C0 controls itself; outside strings its
    output is ASCII, so the translation only ever touches string contents.)"""
    return json.dumps(body, indent=2, ensure_ascii=False).translate(_AS_JSON_ESCAPE)
