"""Latency recording in HDR histograms (microseconds) and the median-of-runs summaries."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 600_000_000  # ten minutes: anything slower is a failure, not a latency
SIGNIFICANT_FIGURES = 3
PERCENTILES = (50.0, 99.0, 99.9)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


def record_seconds(histogram: HdrHistogram, seconds: float) -> None:
    """Record a latency; a negative one (clock granularity across processes) counts as 1 us."""
    micros = round(seconds * 1_000_000)
    histogram.record_value(min(max(micros, LOWEST_US), HIGHEST_US))


def summary(histogram: HdrHistogram) -> dict[str, Any]:
    """Percentiles in milliseconds, with the count they rest on."""
    count = int(histogram.get_total_count())
    if count == 0:
        return {"count": 0}
    out: dict[str, Any] = {"count": count}
    for p in PERCENTILES:
        out[_key(p)] = histogram.get_value_at_percentile(p) / 1000
    out["max_ms"] = histogram.get_max_value() / 1000
    out["mean_ms"] = round(histogram.get_mean_value() / 1000, 3)
    return out


def encoded(histogram: HdrHistogram) -> str:
    """The whole histogram, compressed (HdrHistogram's standard encoding), for the raw data."""
    data = histogram.encode()
    return data.decode() if isinstance(data, bytes) else str(data)


def _key(percentile: float) -> str:
    return f"p{percentile:g}".replace(".", "_") + "_ms"


PERCENTILE_KEYS = tuple(_key(p) for p in PERCENTILES)


def median_of(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(statistics.median(present)) if present else None


def median_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each percentile is the median of that percentile over the runs (not a merged histogram:
    a merged one would let one slow run decide the tail)."""
    out: dict[str, Any] = {"runs": len(runs), "count": sum(int(r.get("count", 0)) for r in runs)}
    for key in (*PERCENTILE_KEYS, "max_ms", "mean_ms"):
        out[key] = median_of(r.get(key) for r in runs)
    return out
