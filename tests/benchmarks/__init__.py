"""Benchmarks (issue #6): ``make bench`` (``python -m tests.benchmarks``).

See docs/benchmarks.md.
"""
