"""What a tick hands the evaluator for one source (``ivm.SourceInput``)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame

from ivm import IvmError, SourceInput


def _never() -> DataFrame:
    raise AssertionError("resolved a snapshot no query read")


def test_a_change_feed_given_as_a_function_needs_its_arrow_table() -> None:
    with pytest.raises(IvmError, match="needs its Arrow table"):
        SourceInput(new=_never, delta=_never)
    given = SourceInput(new=_never, old=_never, delta=_never,
                        delta_arrow=pa.table({"_weight": pa.array([1], pa.int64())}),
                        schema_key=("uuid", 3))
    assert given.schema_key == ("uuid", 3)  # nothing was resolved to build it
