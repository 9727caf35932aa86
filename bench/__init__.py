"""Interlock's benchmark harness: ``make bench`` (quick), ``make bench-full``, ``--smoke`` for CI.

See docs/benchmarks.md for what is measured and how; ``python -m bench --help`` for options.
"""
