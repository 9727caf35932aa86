"""docs/benchmarks.md, generated from a run's summary JSON: every number on the page comes from
that file (``python -m bench --report SUMMARY.json`` regenerates it). ``page.render`` writes it,
one module per group of sections."""

from __future__ import annotations

from bench.report.page import render

__all__ = ["render"]
