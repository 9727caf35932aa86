"""Number formats shared by the page's sections."""

from __future__ import annotations

from typing import Any


def ms(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f} ms" if value < 10_000 else f"{value / 1000:,.1f} s"


def num(value: Any, unit: str = "", digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"
