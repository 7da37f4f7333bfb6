"""Benchmarks (issue #6): ``make bench`` or ``python -m tests.benchmarks``; see docs/benchmarks.md."""
