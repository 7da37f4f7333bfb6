"""The refresh-state record: the materialized-view proposal's JSON, and what sinks record."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from sinks.errors import SinkError
from sinks.frontier import FRONTIER_KEY, REFRESHED_AT_KEY, decode_frontier
from sinks.iceberg_schema import arrow_schema, conformed
from sinks.refresh_state import (
    REFRESH_STATE_KEY,
    RefreshState,
    RefreshStates,
    SourceTable,
    freshness_properties,
)

SPEC_EXAMPLE = {  # format/view-spec.md of the proposal, "Materialized View Example"
    "view-version-id": 1,
    "refresh-start-timestamp-ms": 1573518435000,
    "source-states": [{"type": "table", "namespace": ["default"], "name": "events",
                       "uuid": "d4a10b5c-1e8a-4b72-9d67-3f4a8c9e1b2d",
                       "snapshot-id": 6148331192489823102}],
}


def test_the_proposal_example_round_trips() -> None:
    state = RefreshState.model_validate(SPEC_EXAMPLE)
    assert state.source_states[0].snapshot_id == 6148331192489823102
    assert json.loads(state.to_json()) == SPEC_EXAMPLE


def test_sources_without_a_catalog_or_outside_iceberg_give_empty_source_states() -> None:
    states = RefreshStates({"d": SourceTable(delta="/tmp/d"), "i": SourceTable(iceberg="a.b")})
    state = states.state({"d": 3, "i": 5}, started_ms=42)
    assert json.loads(state.to_json()) == {"view-version-id": 1, "refresh-start-timestamp-ms": 42,
                                           "source-states": []}


def test_freshness_properties_carry_frontier_time_and_state() -> None:
    state = RefreshStates({}, view_version_id=3).state({"s": 9}, started_ms=1)
    properties = freshness_properties({"s": 9}, state)
    assert decode_frontier(properties[FRONTIER_KEY]) == {"s": 9}
    assert int(properties[REFRESHED_AT_KEY]) >= 1
    assert json.loads(properties[REFRESH_STATE_KEY])["view-version-id"] == 3


SCHEMA = Schema(NestedField(1, "k", LongType()), NestedField(2, "s", StringType()),
                NestedField(3, "t", TimestamptzType()))


def test_conformed_casts_spark_arrow_to_the_table_types() -> None:
    rows = pa.table({"t": pa.array([0], pa.timestamp("us", tz="Europe/Paris")),
                     "s": ["x"], "k": pa.array([1], pa.int32())})
    out = conformed(rows, SCHEMA, "ns.v")
    assert out.column_names == ["k", "s", "t"]
    assert out.schema.field("k").type == pa.int64()
    assert out.schema.field("t").type == pa.timestamp("us", tz="UTC")
    assert out["t"].cast(pa.int64()).to_pylist() == [0]  # the same instant


def test_conformed_refuses_other_columns() -> None:
    with pytest.raises(SinkError, match="not the table's"):
        conformed(pa.table({"k": [1], "s": ["x"]}), SCHEMA, "ns.v")
    with pytest.raises(SinkError, match="not the table's"):
        conformed(pa.table({"k": [1], "s": ["x"], "t": [None], "extra": [1]}), SCHEMA, "ns.v")


def test_arrow_schema_makes_every_column_nullable() -> None:
    schema = arrow_schema(pa.schema([pa.field("k", pa.int64(), nullable=False)]))
    assert schema.field("k").nullable
