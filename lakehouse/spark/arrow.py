"""Collect Spark DataFrames as Arrow tables (the engine's collector, :mod:`ivm.spark_arrow`)."""

from __future__ import annotations

from ivm.spark_arrow import to_arrow

__all__ = ["to_arrow"]
