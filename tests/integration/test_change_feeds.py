"""Change feeds are exact for every kind of commit.

For each commit kind, written by Spark and (where it can write that kind) by pyiceberg or
delta-rs, the consolidated change feed between two versions must equal the multiset
difference of the table's snapshots at those versions.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import AlwaysTrue, EqualTo
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record, TableVersion
from pyiceberg.types import IntegerType, ListType, NestedField, StructType
from pyspark.sql import DataFrame, SparkSession

from ivm import WEIGHT, KeyValues, consolidate, with_weight
from lakehouse.errors import SnapshotExpiredError, SourceError
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.base import ChangeFeed, SourceReader
from lakehouse.sources.column_cache import ColumnCache
from lakehouse.sources.delta import DeltaSourceReader
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.sources.iceberg_feed import ArrowChangeFeed, arrow_change_feed, scan_tasks
from lakehouse.sources.iceberg_files import ChangedFiles, changed_files
from lakehouse.sources.iceberg_lineage import lineage
from lakehouse.sources.iceberg_positions import position_changes
from lakehouse.sources.manifest_cache import ManifestCache
from tests.conftest import multiset, normal_row
from tests.spark_frames import spark_frame

pytestmark = pytest.mark.spark

ROWS = [(i, f"v{i}") for i in range(1, 9)]
MODES = ("copy-on-write", "merge-on-read")


def _feed(change: ChangeFeed) -> dict[tuple[object, ...], int]:
    rows = change.rows.collect()
    if change.arrow is not None:  # the Arrow copy is the same Z-set
        assert change.arrow.num_rows == len(rows)
        assert change.arrow.column_names == change.rows.columns
    feed = {normal_row(row[:-1]): row[-1] for row in rows}
    assert len(feed) == len(rows), "a consolidated change feed has each row once"
    assert all(feed.values()), "a consolidated change feed has no zero weights"
    return feed


class Exact:
    """Checks change feeds against the snapshots' multiset difference (snapshots cached)."""

    def __init__(self, *readers):
        self.readers = readers
        self.snapshots: dict[int | None, Counter[tuple[object, ...]]] = {}

    def rows(self, version: int | None) -> Counter[tuple[object, ...]]:
        if version not in self.snapshots:
            self.snapshots[version] = multiset(self.readers[0].snapshot(version).collect())
        return self.snapshots[version]

    def expected(self, old: int | None, new: int) -> dict[tuple[object, ...], int]:
        """Counter(new rows) - Counter(old rows), keeping negative counts."""
        expected = Counter(self.rows(new))
        expected.subtract(self.rows(old))
        return {row: n for row, n in expected.items() if n}

    def check(self, old: int | None, new: int,
              readers: Sequence[SourceReader] = ()) -> dict[tuple[object, ...], int]:
        """The change feed of every reader from ``old`` to ``new`` is exact; returns it."""
        expected = self.expected(old, new)
        for reader in readers or self.readers:
            assert _feed(reader.change_feed(old, new)) == expected, (reader, old, new)
        return expected

    def steps(self, versions: list[int]) -> None:
        """Each step of ``versions`` (first reader), and the whole range (all), is exact."""
        first = self.readers[0]
        for old, new in zip(versions, versions[1:], strict=False):
            self.check(old, new, [first])
        self.check(versions[0], versions[-1])


# --- Iceberg -------------------------------------------------------------------------------


@pytest.fixture
def iceberg(spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
            tmp_path: Path):
    """A factory: create a table ``lakehouse.<ns>.<name>`` and readers for it.

    The first reader reads changed files with pyiceberg, keeping decoded columns in a
    1 MiB cache (so repeated checks read them from it) and manifest entries in another
    (so its snapshots are planned from them); with ``spark_reader`` a second one reads
    them with Spark (the changed files staged, :mod:`lakehouse.sources.iceberg_staged`).
    """

    def create(name: str, mode: str = "copy-on-write", partitioned: bool = False,
               spark_reader: bool = False):
        table = f"lakehouse.{catalog_namespace}.{name}"
        modes = ", ".join(f"'write.{op}.mode' = '{mode}'" for op in ("delete", "update", "merge"))
        spark.sql(
            f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg "
            + ("PARTITIONED BY (bucket(2, id)) " if partitioned else "")
            + f"TBLPROPERTIES ('format-version' = '2', {modes})"
        )
        identifier = f"{catalog_namespace}.{name}"
        bridge = ArrowBridge(spark, tmp_path / "scratch")
        readers = [
            IcebergSourceReader(spark, rest_catalog, "lakehouse", name, identifier, bridge=bridge,
                                cache=ColumnCache(1 << 20), manifests=ManifestCache()),
        ]
        if spark_reader:
            readers.append(IcebergSourceReader(spark, rest_catalog, "lakehouse", name, identifier))
        return table, readers

    return create


def _sql(spark: SparkSession, reader: IcebergSourceReader, statement: str) -> int:
    """Run ``statement`` and return the snapshot it committed."""
    spark.sql(statement)
    version = reader.current_version()
    assert version is not None
    return version


def _insert(table: str, rows: list[tuple[int, str]]) -> str:
    return f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, '{v}')" for i, v in rows)


def _pyiceberg_rows(rows: list[tuple[int, str]]) -> pa.Table:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    return pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=schema)


def test_iceberg_appends_by_spark_and_pyiceberg(spark, iceberg, rest_catalog) -> None:
    table, readers = iceberg("appends")
    first = _sql(spark, readers[0], _insert(table, ROWS[:4]))
    second = _sql(spark, readers[0], _insert(table, ROWS[:2]))  # duplicates: weight 2
    rest_catalog.load_table(readers[0].identifier).append(_pyiceberg_rows(ROWS[4:]))
    third = readers[0].current_version()
    assert third is not None
    exact = Exact(*readers)
    exact.steps([first, second, third])
    assert exact.check(first, second) == {normal_row(r): 1 for r in ROWS[:2]}
    assert exact.check(None, third)[normal_row(ROWS[0])] == 2


@pytest.mark.parametrize("mode", MODES)
def test_iceberg_delete_update_merge_by_spark(spark, iceberg, mode: str) -> None:
    table, readers = iceberg(f"dml_{mode.replace('-', '_')}", mode, partitioned=True,
                             spark_reader=mode == "merge-on-read")
    reader = readers[0]
    versions = [_sql(spark, reader, _insert(table, ROWS))]
    for statement in (
        f"DELETE FROM {table} WHERE id = 1",
        f"DELETE FROM {table} WHERE id IN (2, 5)",  # a second delete on the same files
        f"UPDATE {table} SET v = 'updated' WHERE id IN (3, 6)",
        f"MERGE INTO {table} t USING (SELECT 4 AS id, 'merged' AS v UNION ALL "
        "SELECT 40, 'new' UNION ALL SELECT 7, 'gone') s ON t.id = s.id "
        "WHEN MATCHED AND s.v = 'gone' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        f"DELETE FROM {table} WHERE id >= 0",  # everything
    ):
        versions.append(_sql(spark, reader, statement))
    operations = [s.summary.operation.value for s in
                  reader._table().metadata.snapshots if s.summary is not None]
    if mode == "merge-on-read":  # the position-delete path is what this case is about
        summaries = [s.summary for s in reader._table().metadata.snapshots if s.summary]
        assert any(s["added-position-deletes"] for s in summaries), operations
    Exact(*readers).steps(versions)


def test_iceberg_overwrites_by_spark_and_pyiceberg(spark, iceberg, rest_catalog) -> None:
    table, readers = iceberg("overwrites")
    reader = readers[0]
    versions = [_sql(spark, reader, _insert(table, ROWS))]
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
    versions.append(_sql(spark, reader, f"INSERT OVERWRITE {table} "
                                        f"SELECT * FROM {table} WHERE id > 3"))
    pyiceberg_table = rest_catalog.load_table(reader.identifier)
    pyiceberg_table.overwrite(_pyiceberg_rows([(4, "four"), (4, "four")]), EqualTo("id", 4))
    versions.append(reader.current_version())
    rest_catalog.load_table(reader.identifier).delete(EqualTo("id", 5))  # copy-on-write
    versions.append(reader.current_version())
    operations = [s.summary.operation.value for s in
                  reader._table().metadata.snapshots if s.summary is not None]
    # Spark's INSERT OVERWRITE; pyiceberg's overwrite (an overwrite, then an append); pyiceberg's
    # delete rewriting a file (an overwrite).
    assert operations == ["append", "overwrite", "overwrite", "append", "overwrite"]
    Exact(*readers).steps(versions)


def _plan(tasks: Iterable[FileScanTask]) -> dict[str, list[str]]:
    return {t.file.file_path: sorted(d.file_path for d in t.delete_files) for t in tasks}


def test_manifest_cache_plans_as_pyiceberg(spark, iceberg) -> None:
    """Planned from kept entries, every snapshot's tasks and their delete files are the
    ones pyiceberg plans from the manifests, with and without a row filter."""
    table, readers = iceberg("planned", "merge-on-read", partitioned=True)
    reader = readers[0]
    versions = [_sql(spark, reader, _insert(table, ROWS[:4])),
                _sql(spark, reader, _insert(table, ROWS[4:])),
                _sql(spark, reader, f"DELETE FROM {table} WHERE id IN (2, 5)"),
                _sql(spark, reader, f"UPDATE {table} SET v = 'x' WHERE id = 6")]
    spark.sql(f"CALL lakehouse.system.rewrite_data_files(table => '{reader.identifier}', "
              "options => map('rewrite-all', 'true'))")
    versions += [reader.current_version(), _sql(spark, reader, f"DELETE FROM {table} WHERE id = 7")]
    cache, pyiceberg_table = ManifestCache(), reader._table()
    for version in versions * 2:  # the second round reads every manifest from the cache
        assert version is not None
        for row_filter in (None, EqualTo("id", 3)):
            expected = pyiceberg_table.scan(snapshot_id=version,
                                            row_filter=row_filter or AlwaysTrue()).plan_files()
            assert _plan(cache.plan_files(pyiceberg_table, version, row_filter)) == _plan(
                list(expected)), (version, row_filter)
    assert _plan(cache.plan_files(pyiceberg_table, versions[-1], EqualTo("id", 3))) != _plan(
        cache.plan_files(pyiceberg_table, versions[-1]))  # the filter prunes a bucket
    with pytest.raises(ValueError, match="no snapshot 42"):
        cache.plan_files(pyiceberg_table, 42)
    # Restricted to some data files: their tasks, delete files too, from the manifests
    # kept (the index by data file), none kept yet, or a few kept at a time.
    for planner in (cache, ManifestCache(), ManifestCache(max_entries=3)):
        for version in versions:
            assert version is not None
            whole = _plan(pyiceberg_table.scan(snapshot_id=version).plan_files())
            for some in (set(sorted(whole)[::2]), set(sorted(whole)[1::2])):
                some.add("s3://nowhere/not-a-file.parquet")
                assert _plan(planner.plan_files(pyiceberg_table, version, paths=some)) == {
                    path: deletes for path, deletes in whole.items() if path in some}, version


def test_a_change_feed_plans_only_the_files_its_commits_changed(
    spark, iceberg, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, (reader,) = iceberg("restricted", "merge-on-read")
    versions = [_sql(spark, reader, _insert(table, [row])) for row in ROWS[:5]]
    versions.append(_sql(spark, reader, f"DELETE FROM {table} WHERE id = 2"))
    planned: list[frozenset[str] | None] = []
    plan_files = ManifestCache.plan_files

    def recording(self, table, snapshot_id, row_filter=None, paths=None):  # type: ignore[no-untyped-def]
        planned.append(frozenset(paths) if paths is not None else None)
        return plan_files(self, table, snapshot_id, row_filter, paths)

    monkeypatch.setattr(ManifestCache, "plan_files", recording)
    Exact(reader).steps(versions[-3:])  # an append, a delete of another file's row, both
    assert planned and None not in planned  # no whole plan of the 5 data files
    assert max(len(paths or ()) for paths in planned) == 2


def test_iceberg_compaction_reads_nothing(spark, iceberg) -> None:
    table, readers = iceberg("compaction", "merge-on-read", spark_reader=True)
    reader = readers[0]
    versions = [_sql(spark, reader, _insert(table, ROWS[:4])),
                _sql(spark, reader, _insert(table, ROWS[4:])),
                _sql(spark, reader, f"DELETE FROM {table} WHERE id = 2")]
    spark.sql(f"CALL lakehouse.system.rewrite_data_files(table => '{reader.identifier}', "
              "options => map('rewrite-all', 'true'))")
    compacted = reader.current_version()
    assert compacted is not None and compacted != versions[-1]
    metadata = reader._table().metadata
    chain = lineage(metadata, versions[-1], compacted, source="compaction").snapshots
    assert chain is not None and chain[0].summary.operation.value == "replace"
    assert changed_files(metadata, reader._table().io, chain).paths == set()
    for each in readers:
        assert each.change_feed(versions[-1], compacted).rows.count() == 0
    # A delete after the compaction hits the compacted file: the range must read it whole.
    versions += [compacted, _sql(spark, reader, f"DELETE FROM {table} WHERE id = 7")]
    Exact(*readers).steps(versions)


def test_iceberg_expired_snapshot_raises(spark, iceberg) -> None:
    table, readers = iceberg("expired")
    reader = readers[0]
    old = _sql(spark, reader, _insert(table, ROWS[:2]))
    middle = _sql(spark, reader, _insert(table, ROWS[2:4]))
    new = _sql(spark, reader, _insert(table, ROWS[4:]))
    spark.sql(f"CALL lakehouse.system.expire_snapshots(table => '{reader.identifier}', "
              "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    with pytest.raises(SnapshotExpiredError) as error:
        reader.change_feed(old, new)
    assert error.value.version == old and error.value.source == "expired"
    assert isinstance(error.value, SourceError)
    assert "expire" in str(error.value) and "full refresh" in str(error.value)
    with pytest.raises(SnapshotExpiredError):
        reader.change_feed(middle, new)


def test_iceberg_expired_snapshot_inside_the_range(spark, iceberg, caplog) -> None:
    """Only a snapshot between old and new expired: both ends remain, so compare them."""
    table, readers = iceberg("expired_inside")
    reader = readers[0]
    old = _sql(spark, reader, _insert(table, ROWS[:2]))
    middle = _sql(spark, reader, _insert(table, ROWS[2:4]))
    new = _sql(spark, reader, f"DELETE FROM {table} WHERE id = 1")
    spark.sql(f"CALL lakehouse.system.expire_snapshots(table => '{reader.identifier}', "
              f"snapshot_ids => array({middle}))")
    assert reader._table().metadata.snapshot_by_id(middle) is None
    with caplog.at_level(logging.WARNING, logger="lakehouse.sources.iceberg"):
        assert Exact(reader).check(old, new) == {
            normal_row(ROWS[0]): -1, normal_row(ROWS[2]): 1, normal_row(ROWS[3]): 1}
    # the catalog keeps the parent id of ``new`` (a snapshot never changes): the walk
    # names the expired snapshot
    assert f"snapshot {middle} between {old} and {new} was expired" in caplog.text


def test_iceberg_branch_ref_and_rollback(spark, iceberg, rest_catalog, caplog) -> None:
    table, readers = iceberg("refs", spark_reader=True)
    main = readers[0]
    base = _sql(spark, main, _insert(table, ROWS[:4]))
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH dev")
    spark.sql(_insert(f"{table}.branch_dev", ROWS[4:6]))
    spark.sql(f"DELETE FROM {table}.branch_dev WHERE id = 1")
    dev = IcebergSourceReader(spark, rest_catalog, "lakehouse", "refs", main.identifier,
                              ref="dev", bridge=readers[0].bridge)
    head = dev.current_version()
    assert main.current_version() == base and head not in (None, base)
    assert head is not None
    exact = Exact(dev)
    assert exact.check(base, head) == {normal_row(ROWS[0]): -1, normal_row(ROWS[4]): 1,
                                       normal_row(ROWS[5]): 1}
    missing = IcebergSourceReader(spark, rest_catalog, "lakehouse", "refs", main.identifier,
                                  ref="nope")
    with pytest.raises(SourceError, match="no branch or tag 'nope'"):
        missing.current_version()
    # Main moves on; dev's head is no ancestor of it: the whole snapshots are compared.
    moved = _sql(spark, main, _insert(table, ROWS[6:]))
    with caplog.at_level(logging.WARNING, logger="lakehouse.sources.iceberg"):
        Exact(*readers).check(head, moved)
    assert "not an ancestor" in caplog.text


def _duplicated_rows(count: int) -> pa.Table:
    """Rows ``(i % 97, 'v<i % 97>')``, v NULL for every fifth i: duplicates, some with NULL."""
    ids = [i % 97 for i in range(count)]
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "v": pa.array([None if i % 5 == 0 else f"v{k}" for i, k in enumerate(ids)],
                                   pa.string())})


def _arrow_feed(reader: IcebergSourceReader, old: int, new: int) -> ArrowChangeFeed:
    """How the reader's bridge path reads the change from ``old`` to ``new``."""
    table = reader._table()
    chain = lineage(table.metadata, old, new, source=reader.name).snapshots
    assert chain is not None
    feed = arrow_change_feed(table, old, new, changed_files(table.metadata, table.io, chain).paths,
                             table.schema())
    assert feed is not None  # no bound given
    return feed


def _changed(reader: IcebergSourceReader, old: int, new: int) -> ChangedFiles:
    table = reader._table()
    chain = lineage(table.metadata, old, new, source=reader.name).snapshots
    assert chain is not None
    return changed_files(table.metadata, table.io, chain)


def _data_files(reader: IcebergSourceReader) -> list[str]:
    return sorted(t.file.file_path for t in reader._table().scan().plan_files())


def test_iceberg_merge_on_read_reads_only_deleted_positions(spark, iceberg, rest_catalog) -> None:
    """Deletes on one multi-row-group file, one after another: only the positions are read."""
    table, readers = iceberg("positions", "merge-on-read", spark_reader=True)
    reader = readers[0]
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.parquet.row-group-limit' = '100')")
    unique = _pyiceberg_rows([(i, f"u{i}") for i in range(900, 1000)])  # the 10th row group
    rest_catalog.load_table(reader.identifier).append(
        pa.concat_tables([_duplicated_rows(900), unique]))
    versions = [reader.current_version()]
    [data_file] = _data_files(reader)
    with reader._table().io.new_input(data_file).open() as stream:
        assert pq.ParquetFile(stream).num_row_groups == 10
    for statement in (
        f"DELETE FROM {table} WHERE id = 7",  # duplicates, with and without NULL
        f"DELETE FROM {table} WHERE id IN (20, 96) OR v IS NULL AND id < 5",  # same file again
        f"UPDATE {table} SET v = v WHERE id = 30",  # deletes and re-inserts equal rows
        f"DELETE FROM {table} WHERE id = 31 AND v IS NOT NULL",
        f"DELETE FROM {table} WHERE id IN (905, 950)",  # rows of one row group
    ):
        versions.append(_sql(spark, reader, statement))
    assert all(s.summary["added-position-deletes"] for s in reader._table().metadata.snapshots[1:])
    exact = Exact(*readers)
    exact.steps(versions)
    assert exact.check(versions[0], versions[1]) == {(7, "v7"): -8, (7, None): -2}
    assert exact.check(versions[2], versions[3]) == {}
    assert exact.check(versions[4], versions[5]) == {(905, "u905"): -1, (950, "u950"): -1}
    for old, new in zip(versions, versions[1:], strict=False):
        feed = _arrow_feed(reader, old, new)
        assert feed.by_position == [data_file] and data_file not in feed.whole
    assert _arrow_feed(reader, versions[0], versions[-1]).by_position == [data_file]
    replaced = []
    for old, new in zip(versions, versions[1:], strict=False):  # Spark reads it once, too
        changed = _changed(reader, old, new)
        assert changed.only_deleted().keys() == {data_file}, (old, new, changed)
        assert changed.rewritten == changed.paths - {data_file}  # the UPDATE's new file
        replaced.append(bool(changed.replaced_deletes))
    assert any(replaced)  # Iceberg merged an older delete file into a new one: checked, kept
    # Backwards, the deleted positions are restored: the same rows with weight +1.
    iceberg_table = reader._table()
    pair = [(scan_tasks(iceberg_table, versions[1])[data_file],
             scan_tasks(iceberg_table, versions[0])[data_file])]
    restored = position_changes(iceberg_table.metadata, iceberg_table.io, pair,
                                iceberg_table.schema())
    assert multiset(tuple(r.values()) for r in restored.to_pylist()) == {
        (7, "v7", 1): 8, (7, None, 1): 2}


def test_iceberg_change_computed_on_spark_when_the_driver_reads_no_row(spark, iceberg) -> None:
    """``in_arrow=False`` (engine spark): the executors read the changed files, staged."""
    table, [reader] = iceberg("on_spark", "merge-on-read", partitioned=True)
    versions = [_sql(spark, reader, _insert(table, ROWS))]
    for statement in (f"DELETE FROM {table} WHERE id IN (2, 5)",
                      f"UPDATE {table} SET v = 'updated' WHERE id = 3",
                      f"ALTER TABLE {table} RENAME COLUMN v TO w",
                      f"INSERT INTO {table} VALUES (20, 'new')"):
        versions.append(_sql(spark, reader, statement))
    exact = Exact(reader)
    for old, new in zip(versions, versions[1:], strict=False):
        feed = reader.change_feed(old, new, in_arrow=False)
        if feed.arrow is not None:  # no file changed (the rename): nothing read at all
            assert feed.arrow.num_rows == 0
        else:
            assert feed.checkpointed_rows == feed.rows.count()
        assert _feed(feed) == exact.expected(old, new), (old, new)
    # the renamed column keeps its values: files are matched to the new snapshot by field id
    renamed = reader.change_feed(versions[0], versions[-1], in_arrow=False).rows
    assert renamed.columns == ["id", "w", WEIGHT]
    assert {(r.id, r.w, r[WEIGHT]) for r in renamed.collect()} == {
        (2, "v2", -1), (5, "v5", -1), (3, "v3", -1), (3, "updated", 1), (20, "new", 1)}
    jvm = spark._jvm
    java_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, table)
    staged = jvm.org.apache.iceberg.spark.ScanTaskSetManager.get().fetchSetIds(java_table)
    assert staged.isEmpty()  # each feed un-stages its files once computed


@pytest.mark.parametrize("mode", MODES)
def test_iceberg_change_beyond_the_driver_bound_is_computed_by_spark(
        spark, iceberg, rest_catalog, mode: str) -> None:
    """A change whose files hold more rows than ``arrow_max_rows`` is left to Spark."""
    table, [reader] = iceberg(f"bound_{mode.replace('-', '_')}", mode)
    reader.arrow_max_rows = 9
    rest_catalog.load_table(reader.identifier).append(_pyiceberg_rows(ROWS))  # one file
    versions = [reader.current_version()]
    exact = Exact(reader)
    steps = [(_insert(table, [(20, "a"), (21, "b")]), False),  # new files of 2 rows
             # copy-on-write reads the 8-row file before and its 6 rows after; merge-on-read
             # the 2 deleted positions
             (f"DELETE FROM {table} WHERE id IN (2, 5)", mode == "copy-on-write"),
             (f"UPDATE {table} SET v = 'u' WHERE id > 0", True)]  # 8 rows, at both
    for statement, on_spark in steps:
        versions.append(_sql(spark, reader, statement))
        feed = reader.change_feed(versions[-2], versions[-1])
        assert (feed.arrow is None) == on_spark, (statement, feed.arrow)
        assert _feed(feed) == exact.expected(versions[-2], versions[-1]), statement
    reader.arrow_max_rows = 1_000
    assert reader.change_feed(versions[0], versions[-1]).arrow is not None


def test_iceberg_copy_on_write_difference_with_duplicates_and_nulls(spark, iceberg,
                                                                    rest_catalog) -> None:
    table, readers = iceberg("cow_duplicates", "copy-on-write", spark_reader=True)
    reader = readers[0]
    for _ in range(2):  # two files with equal rows
        rest_catalog.load_table(reader.identifier).append(_duplicated_rows(500))
    versions = [reader.current_version()]
    files = _data_files(reader)
    versions.append(_sql(spark, reader, f"DELETE FROM {table} WHERE id = 7"))
    rest_catalog.load_table(reader.identifier).overwrite(  # 2 x 5 copies of (8, 'v8') -> 1
        _pyiceberg_rows([(8, "v8")]), EqualTo("id", 8))
    versions.append(reader.current_version())
    versions.append(_sql(spark, reader, f"UPDATE {table} SET v = NULL WHERE id = 9"))
    exact = Exact(*readers)
    exact.steps(versions)
    assert exact.check(versions[0], versions[1]) == {(7, "v7"): -10, (7, None): -2}
    assert exact.check(versions[1], versions[2])[(8, "v8")] == -9
    feed = _arrow_feed(reader, versions[0], versions[1])
    assert set(files) <= set(feed.whole) and feed.by_position == []
    assert feed.rows.num_rows == 2


def test_iceberg_float_zeros_and_nan_consolidate_as_spark_groups(spark, iceberg) -> None:
    """-0.0 equals 0.0 and NaN equals NaN, as when Spark groups the snapshots' difference."""
    _, readers = iceberg("floats_placeholder")
    reader = readers[0]
    table = f"lakehouse.{reader.identifier.rsplit('.', 1)[0]}.floats"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, x DOUBLE) USING iceberg "
              "TBLPROPERTIES ('format-version' = '2')")
    floats = IcebergSourceReader(spark, reader.catalog, "lakehouse", "floats",
                                 table.split(".", 1)[1], bridge=reader.bridge)
    old = _sql(spark, floats, f"INSERT INTO {table} VALUES (1, 0.0), (1, CAST('-0.0' AS DOUBLE)), "
                              "(2, CAST('NaN' AS DOUBLE)), (2, CAST('NaN' AS DOUBLE)), (3, NULL), "
                              "(3, NULL), (4, 1.0), (5, CAST('-0.0' AS DOUBLE))")
    new = _sql(spark, floats, f"DELETE FROM {table} WHERE id IN (1, 4) OR id = 2 AND x IS NULL")
    spark_feed = consolidate(with_weight(floats.snapshot(new)).unionByName(
        with_weight(floats.snapshot(old), -1)))

    def rows(frame: DataFrame) -> list[tuple[object, ...]]:
        return sorted((r[0], "NaN" if r[1] != r[1] else repr(r[1]), r[2]) for r in frame.collect())

    assert rows(floats.change_feed(old, new).rows) == rows(spark_feed) == [
        (1, "0.0", -2), (4, "1.0", -1)]


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, writing a delete manifest (pyiceberg has none).

    pyiceberg 0.12 declares ``equality_ids`` (field 135) as list<long>; the spec and Java
    (which then fails with a ClassCastException) say list<int>: corrected here
    (apache/iceberg-python#3840, fixed upstream by #3842 after 0.12).
    """

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}

    def _with_partition(self, format_version: TableVersion) -> Schema:
        schema = super()._with_partition(format_version)
        return Schema(*[_int_equality_ids(f) if f.field_id == 2 else f for f in schema.fields])


def _int_equality_ids(data_file: NestedField) -> NestedField:
    assert isinstance(data_file.field_type, StructType)
    fields = [
        NestedField(135, "equality_ids", ListType(136, IntegerType(), element_required=True),
                    required=False) if f.field_id == 135 else f
        for f in data_file.field_type.fields
    ]
    return NestedField(data_file.field_id, data_file.name, StructType(*fields),
                       required=data_file.required)


class _AddDeleteFiles(_FastAppendFiles):
    """A snapshot that adds delete files (in a delete manifest) and keeps every manifest."""

    def new_manifest_writer(self, spec: PartitionSpec) -> ManifestWriter:
        return _DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(),
                                     self._snapshot_id, self._compression)


def _commit_equality_delete(table: Table, ids: list[int]) -> None:
    """Commit an equality delete file on ``id`` (field 1) deleting rows whose id is in ``ids``.

    Neither Spark (position deletes only) nor pyiceberg 0.12 (copy-on-write deletes) writes
    equality deletes, so the file and its snapshot are built with pyiceberg's low-level API
    (Iceberg spec, "Equality Delete Files").
    """
    field = pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})
    path = f"{table.location()}/data/eq-deletes-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(path).create() as stream:
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}, pa.schema([field])), stream)
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES, file_path=path, file_format=FileFormat.PARQUET,
        partition=Record(), record_count=len(ids), file_size_in_bytes=len(table.io.new_input(path)),
        equality_ids=[1], spec_id=table.spec().spec_id, _table_format_version=2,
    )
    with table.transaction() as transaction:
        with _AddDeleteFiles(Operation.DELETE, transaction, table.io) as producer:
            producer.append_data_file(delete_file)


def test_iceberg_equality_deletes(spark, iceberg, rest_catalog) -> None:
    table, readers = iceberg("equality", spark_reader=True)
    reader = readers[0]
    versions = [_sql(spark, reader, _insert(table, ROWS[:4])),
                _sql(spark, reader, _insert(table, ROWS[4:] + ROWS[:1]))]
    _commit_equality_delete(rest_catalog.load_table(reader.identifier), [1, 6])
    versions.append(reader.current_version())
    assert reader._table().metadata.snapshot_by_id(versions[-1]).summary[
        "total-equality-deletes"] == "2"
    versions.append(_sql(spark, reader, _insert(table, ROWS[:1])))  # after: not deleted
    exact = Exact(*readers)
    exact.steps(versions)
    assert exact.check(versions[1], versions[2]) == {
        normal_row(ROWS[0]): -2, normal_row(ROWS[5]): -1}


# --- Delta ---------------------------------------------------------------------------------


def _delta_rows(rows: list[tuple[int, str]]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "v": pa.array([r[1] for r in rows], pa.string())})


@pytest.mark.parametrize("change_data_feed", [False, True])
def test_delta_commits_with_and_without_change_data_feed(
        spark, tmp_path: Path, change_data_feed: bool, caplog) -> None:
    path = str(tmp_path / "delta")
    configuration = {"delta.enableChangeDataFeed": "true"} if change_data_feed else None
    write_deltalake(path, _delta_rows(ROWS), configuration=configuration)
    write_deltalake(path, _delta_rows(ROWS[:2]), mode="append")
    DeltaTable(path).delete("id = 3")
    DeltaTable(path).update(predicate="id IN (4, 5)", updates={"v": "'updated'"})
    (DeltaTable(path).merge(_delta_rows([(6, "merged"), (60, "new")]), "t.id = s.id",
                            source_alias="s", target_alias="t")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    write_deltalake(path, _delta_rows([(7, "v7"), (70, "x")]), mode="overwrite",
                    predicate="id >= 7")
    reader = DeltaSourceReader(spark, "d", path)
    with caplog.at_level(logging.WARNING, logger="lakehouse.sources.delta"):
        Exact(reader).steps(list(range(0, 6)))
    assert ("change data feed" in caplog.text) is not change_data_feed


def test_delta_compaction_is_no_change_and_vacuum_raises(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "delta")
    for chunk in (ROWS[:3], ROWS[3:6], ROWS[6:]):
        write_deltalake(path, _delta_rows(chunk), mode="append")
    DeltaTable(path).optimize.compact()
    reader = DeltaSourceReader(spark, "d", path)
    assert reader.change_feed(2, 3).rows.count() == 0
    DeltaTable(path).delete("id = 1")
    Exact(reader).check(2, 4)
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False,
                            dry_run=False)
    with pytest.raises(SnapshotExpiredError) as error:
        reader.change_feed(0, 4)
    assert error.value.version == 0 and "vacuum" in str(error.value).lower()


def test_delta_deletion_vectors_without_change_data_feed(spark, tmp_path: Path) -> None:
    """A DELETE that only grows a file's deletion vector (same path) is a change."""
    from delta.tables import DeltaTable as SparkDeltaTable

    path = str(tmp_path / "delta")
    (spark_frame(spark, ROWS, "id long, v string").coalesce(1).write.format("delta")
     .option("delta.enableDeletionVectors", "true").save(path))
    table = SparkDeltaTable.forPath(spark, path)
    table.delete("id = 1")
    table.delete("id IN (2, 3)")
    table.update("id = 4", {"v": "'updated'"})
    reader = DeltaSourceReader(spark, "d", path)
    assert "deletionVectors" in DeltaTable(path).protocol().reader_features
    exact = Exact(reader)
    exact.steps([0, 1, 2, 3])
    assert exact.check(1, 2) == {normal_row(ROWS[1]): -1, normal_row(ROWS[2]): -1}


def test_delta_change_data_feed_enabled_midway(spark, tmp_path: Path, caplog) -> None:
    path = str(tmp_path / "delta")
    write_deltalake(path, _delta_rows(ROWS))
    DeltaTable(path).delete("id = 1")  # version 1, no change data feed
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    DeltaTable(path).delete("id = 2")  # version 3, with a change data feed
    reader = DeltaSourceReader(spark, "d", path)
    exact = Exact(reader)
    with caplog.at_level(logging.WARNING, logger="lakehouse.sources.delta"):
        exact.check(2, 3)
        assert "change data feed" not in caplog.text
        exact.check(0, 3)
        assert "no change data feed from version 1 to 3" in caplog.text


# --- Projection ----------------------------------------------------------------------------


def _projected_feed(change: ChangeFeed) -> dict[tuple[object, ...], int]:
    assert change.rows.columns == ["id", "_weight"]
    if change.arrow is not None:
        assert change.arrow.column_names == ["id", "_weight"]
    return _feed(change)


def test_change_feeds_projected_onto_the_columns_a_view_uses(spark, iceberg,
                                                             tmp_path: Path) -> None:
    """An update to a column the view does not read is no change of its projection; the
    rest is the projection of the whole change (rows equal on ``id`` add up)."""
    table, readers = iceberg("projected", "merge-on-read", spark_reader=True)
    old = _sql(spark, readers[0], _insert(table, ROWS[:4]))
    new = _sql(spark, readers[0], f"UPDATE {table} SET v = 'changed' WHERE id = 1")
    newer = _sql(spark, readers[0], f"DELETE FROM {table} WHERE id = 2")
    newest = _sql(spark, readers[0], _insert(table, [(3, "again"), (3, "and again")]))
    path = str(tmp_path / "projected_delta")
    write_deltalake(path, _delta_rows(ROWS[:4]),
                    configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(path).update(predicate="id = 1", updates={"v": "'changed'"})
    DeltaTable(path).delete("id = 2")
    write_deltalake(path, _delta_rows([(3, "again"), (3, "and again")]), mode="append")
    delta = DeltaSourceReader(spark, "d", path)
    for reader, first, second, last in ((readers[0], old, new, newest),
                                        (readers[1], old, new, newest), (delta, 0, 1, 3)):
        assert _projected_feed(reader.change_feed(first, second, {"ID"})) == {}
        assert _projected_feed(reader.change_feed(first, last, {"id"})) == {(2,): -1, (3,): 2}
        whole = reader.change_feed(first, last, {"id", "no_such_column"})
        assert whole.rows.columns == ["id", "v", "_weight"]  # unknown name: no projection
    assert _projected_feed(readers[0].change_feed(newer, newest, {"id"})) == {(3,): 2}


def test_iceberg_rows_for_join_keys_are_the_live_matching_rows(spark, iceberg) -> None:
    """A join view's partner read: rows at a version whose keys match, deletes applied."""
    table, (reader,) = iceberg("partners", mode="merge-on-read")
    for start in (0, 100, 200):  # three data files with disjoint key ranges
        version = _sql(spark, reader, _insert(table, [(i, f"v{i}") for i in range(start,
                                                                                   start + 50)]))
    old = version
    new = _sql(spark, reader, f"DELETE FROM {table} WHERE id IN (105, 110, 250)")
    keys = {"ID": KeyValues(105, 120, (105, 107, 120))}  # names as the SQL writes them

    def matching(version: int) -> Counter[tuple[object, ...]]:
        rows = reader.snapshot(version).where("id IN (105, 107, 120)").collect()
        return multiset((r["id"], r["v"]) for r in rows)

    uncached = IcebergSourceReader(spark, reader.catalog, "lakehouse", "partners",
                                   reader.identifier)
    for version, source in itertools.product((old, new, old), (reader, uncached)):
        found = source.arrow_rows(version, ["ID", "v"], keys, max_rows=1000)
        assert found is not None and found.column_names == ["id", "v"]
        assert multiset(r.values() for r in found.to_pylist()) == matching(version)
    assert reader.cache is not None and reader.cache.hits > 0
    # more values than pyiceberg's filter takes: pruned by the bounds, looked up exactly
    many = {"id": KeyValues(105, 1299, (*range(105, 121), *range(1000, 1300)))}
    found = reader.arrow_rows(new, ["id", "v"], many, max_rows=1000)
    assert found is not None
    expected = reader.snapshot(new).where("id BETWEEN 105 AND 120").collect()
    assert multiset(r.values() for r in found.to_pylist()) == multiset(
        (r["id"], r["v"]) for r in expected)
    # bounds alone (values not listed): the live rows in the range
    ranged = reader.arrow_rows(new, ["v", "id"], {"id": KeyValues(140, 205)}, max_rows=1000)
    expected = reader.snapshot(new).where("id BETWEEN 140 AND 205").collect()
    assert ranged is not None and ranged.column_names == ["id", "v"]  # the snapshot's order
    assert multiset(r.values() for r in ranged.to_pylist()) == multiset(
        (r["id"], r["v"]) for r in expected)
    assert reader.arrow_rows(new, ["id"], keys, max_rows=10) is None, "over max_rows: declined"
    # the two files outside the keys' bounds are pruned: 50 rows scanned, not 150
    assert reader.arrow_rows(new, ["id"], keys, max_rows=60) is not None
    nothing = reader.arrow_rows(new, ["id"], {"id": KeyValues(None, None)}, max_rows=10)
    assert nothing is not None and nothing.num_rows == 0


def test_iceberg_rows_for_join_keys_decline_keys_pyiceberg_cannot_filter(spark, iceberg) -> None:
    """A renamed key column, or a NaN key: None (Spark reads it), never an error."""
    table, (reader,) = iceberg("partners_renamed")
    version = _sql(spark, reader, _insert(table, [(1, "a"), (2, "b")]))
    keys = {"id": KeyValues(1, 2, (1, 2))}
    assert reader.arrow_rows(version, ["id", "v"], keys, max_rows=10) is not None
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN id TO ident")
    assert reader.current_version() == version  # a tick loads the table's new metadata
    # pyiceberg binds the filter to the current schema, where `id` is no longer a column
    assert reader.arrow_rows(version, ["id", "v"], keys, max_rows=10) is None
    nan = {"v": KeyValues(float("nan"), float("nan"), (float("nan"),))}
    assert reader.arrow_rows(version, ["v"], nan, max_rows=10) is None
