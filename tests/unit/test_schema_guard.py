"""Which columns a view reads, and how a source's change to them is named (no Spark)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType

from ivm import compile_view, used_columns
from lakehouse import schema_guard
from lakehouse.config import parse_config
from lakehouse.schema_guard import SchemaGuard, column_changes
from lakehouse.sources.schema import SourceColumn, SourceSchema, delta_schema, iceberg_schema

FLIGHTS = {"carrier": "string", "flight": "int", "dep_delay": "double", "origin": "string",
           "tail": "string"}
AIRLINES = {"carrier": "string", "name": "string", "country": "string"}


def _used(sql: str) -> dict[str, set[str]]:
    plan = compile_view("v", sql, {"flights": FLIGHTS, "airlines": AIRLINES})
    return used_columns(plan.query, plan.sources)


def test_used_columns_follow_every_clause_and_subquery() -> None:
    used = _used("SELECT f.carrier, a.name, COUNT(*) AS n, SUM(f.dep_delay) AS total "
                 "FROM flights f JOIN airlines a ON f.carrier = a.carrier "
                 "WHERE f.flight IN (SELECT flight FROM flights WHERE origin = 'JFK') "
                 "GROUP BY f.carrier, a.name")
    assert used == {"flights": {"carrier", "dep_delay", "flight", "origin"},
                    "airlines": {"carrier", "name"}}


def test_star_reads_every_column_and_count_star_none() -> None:
    assert _used("SELECT * FROM airlines") == {"airlines": set(AIRLINES)}
    assert _used("SELECT COUNT(*) AS n FROM flights") == {"flights": set()}
    assert _used("WITH late AS (SELECT carrier FROM flights WHERE dep_delay > 10) "
                 "SELECT carrier, COUNT(*) AS n FROM late GROUP BY carrier") == {
        "flights": {"carrier", "dep_delay"}}


def _schema(*columns: tuple[str, str, int | None]) -> SourceSchema:
    return SourceSchema(tuple(SourceColumn(n, t, t, i) for n, t, i in columns))


BEFORE = _schema(("a", "int", 1), ("b", "string", 2), ("c", "double", 3), ("d", "long", 4))


@pytest.mark.parametrize(("after", "change", "detail"), [
    (_schema(("x", "int", 1), ("b", "string", 2)), "renamed", "renamed to 'x'"),
    (_schema(("b", "string", 2)), "dropped", "dropped"),
    (_schema(("a", "long", 1), ("b", "string", 2)), "retyped", "retyped from int to long"),
    (_schema(("a", "int", 9), ("b", "string", 2)), "replaced", "dropped and added again"),
])
def test_a_change_to_a_read_column_is_named(after: SourceSchema, change: str,
                                            detail: str) -> None:
    (found,) = column_changes("s", 7, BEFORE, after, {"a", "b"})
    assert (found.source, found.column, found.change, found.version) == ("s", "a", change, 7)
    assert found.detail.startswith(detail)
    assert "source 's': column 'a' " + detail in found.describe()


def test_changes_to_columns_not_read_and_added_columns_are_ignored() -> None:
    after = _schema(("a", "int", 1), ("b", "string", 2), ("new", "int", 5))  # c, d dropped
    assert column_changes("s", 7, BEFORE, after, {"a", "b"}) == []
    assert [c.change for c in column_changes("s", 7, BEFORE, after, {"a", "c"})] == ["dropped"]


def test_without_column_ids_a_rename_is_reported_as_dropped_or_renamed() -> None:
    before = _schema(("a", "int", None), ("b", "string", None))
    (found,) = column_changes("s", 1, before, _schema(("x", "int", None)), {"a"})
    assert found.change == "dropped" and "dropped or renamed" in found.detail


def test_iceberg_schema_is_the_snapshots_schema_by_field_id() -> None:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "v", StringType()),
                    NestedField(3, "x", IntegerType()), NestedField(4, "d", DoubleType()))
    metadata = new_table_metadata(schema, PartitionSpec(), SortOrder(), "file:///t", {})
    found = iceberg_schema(metadata, None)
    assert found is not None
    assert [(c.name, c.type, c.spark_type, c.field_id) for c in found.columns] == [
        ("id", "long", "bigint", 1), ("v", "string", "string", 2), ("x", "int", "int", 3),
        ("d", "double", "double", 4)]
    assert iceberg_schema(metadata, 123) is None  # no such snapshot: unknown, not an error


def test_delta_schema_at_each_version(tmp_path) -> None:
    path = str(tmp_path / "d")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}))
    write_deltalake(path, pa.table({"id": pa.array([2], pa.int64()), "v": ["b"],
                                    "ts": pa.array([0], pa.timestamp("us"))}),
                    mode="append", schema_mode="merge")
    old, new = delta_schema(DeltaTable(path, version=0)), delta_schema(DeltaTable(path))
    assert old.spark_types() == {"id": "bigint", "v": "string"}
    assert new.spark_types() == {"id": "bigint", "v": "string", "ts": "timestamp_ntz"}
    assert [c.type for c in new.columns] == ["long", "string", "timestamp_ntz"]
    assert new.column("id") is not None and new.column("id").field_id is None  # type: ignore[union-attr]


SPARK_MAPPED = [
    pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
    pa.string(), pa.binary(), pa.date32(), pa.decimal128(7, 2), pa.decimal128(38, 10),
    pa.timestamp("us"), pa.timestamp("us", tz="UTC"), pa.duration("us"), pa.null(),
    pa.list_(pa.int32()), pa.map_(pa.string(), pa.float64()),
    pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]),
    pa.list_(pa.struct([("x", pa.decimal128(10, 0))])),
]


@pytest.mark.parametrize("arrow_type", SPARK_MAPPED, ids=str)
def test_spark_type_names_are_pysparks(arrow_type: pa.DataType) -> None:
    from pyspark.sql.pandas.types import from_arrow_type

    from lakehouse.sources.schema import _spark_type

    expected = from_arrow_type(arrow_type, prefer_timestamp_ntz=True).simpleString()
    assert _spark_type(arrow_type) == expected
    assert _spark_type(pa.dictionary(pa.int32(), arrow_type)) == expected


@pytest.mark.parametrize(("variant", "plain"), [
    (pa.large_string(), "string"), (pa.string_view(), "string"), (pa.large_binary(), "binary"),
    (pa.binary_view(), "binary"), (pa.large_list(pa.large_string()), "array<string>"),
    (pa.list_view(pa.int8()), "array<tinyint>")])
def test_large_and_view_variants_are_named_as_the_plain_types(variant: pa.DataType,
                                                                plain: str) -> None:
    from lakehouse.sources.schema import _spark_type

    assert _spark_type(variant) == plain


@pytest.mark.parametrize("arrow_type", [pa.uint32(), pa.time64("us"), pa.binary(16)], ids=str)
def test_types_spark_lacks_are_refused(arrow_type: pa.DataType) -> None:
    from lakehouse.sources.schema import _spark_type

    with pytest.raises(TypeError, match="Spark has no type"):
        _spark_type(arrow_type)


def test_past_schemas_are_kept_up_to_a_bound_least_recently_used_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source that commits all the time makes a new version each commit: the guard keeps
    the last :data:`PAST_SCHEMAS` it read, not every one, and reads an evicted one again."""
    table = tmp_path / "events"
    for value in range(3):  # versions 0, 1, 2
        write_deltalake(str(table), pa.table({"id": [value]}), mode="append")
    config = parse_config({"warehouse": str(tmp_path / "warehouse"),
                           "sources": {"events": {"delta": str(table)}}})
    reads: list[int | None] = []
    read = SchemaGuard._read

    def counted(self: SchemaGuard, name: str, version: int | None) -> SourceSchema | None:
        reads.append(version)
        return read(self, name, version)

    monkeypatch.setattr(SchemaGuard, "_read", counted)
    monkeypatch.setattr(schema_guard, "PAST_SCHEMAS", 2)
    guard = SchemaGuard(config, catalog=None)  # type: ignore[arg-type]  # Delta: no catalog
    schemas = [guard.schema("events", version) for version in (0, 1, 0, 2, 0, 1)]
    assert reads == [0, 1, 2, 1]  # 0 was used again before 2 came: 1 went out
    assert all(s is not None and [c.name for c in s.columns] == ["id"] for s in schemas)
    assert guard.schema("events", None) is not None and reads[-1] is None  # current: read


def test_versions_of_one_schema_share_one_kept_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal schemas of kept versions are one object, given up with the last of them."""
    table = tmp_path / "events"
    for value in range(3):  # versions 0, 1, 2 of one schema; 3 and 4 add a column
        write_deltalake(str(table), pa.table({"id": [value]}), mode="append")
    for value in range(3, 5):
        write_deltalake(str(table), pa.table({"id": [value], "kind": ["a"]}), mode="append",
                        schema_mode="merge")
    config = parse_config({"warehouse": str(tmp_path / "warehouse"),
                           "sources": {"events": {"delta": str(table)}}})
    monkeypatch.setattr(schema_guard, "PAST_SCHEMAS", 2)
    guard = SchemaGuard(config, catalog=None)  # type: ignore[arg-type]  # Delta: no catalog
    first, second, third, wider = (guard.schema("events", version) for version in range(4))
    assert first is second is third
    assert wider is not None and wider != first and [c.name for c in wider.columns] == [
        "id", "kind"]
    shared = weakref.ref(first)
    del first, second, third
    gc.collect()
    assert shared() is not None  # version 2 is kept (with 3)
    guard.schema("events", 4)  # version 2 goes out: no kept version has that schema
    gc.collect()
    assert shared() is None
