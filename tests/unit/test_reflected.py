"""Polls that skip from the sources' versions (lakehouse/reflected.py), on real Iceberg
readers over a SQLite catalog, with a settable clock."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from lakehouse.reflected import FULL_CHECK_EVERY_S, VERSIONS_TTL_S, ReflectedFrontiers
from lakehouse.sources.iceberg import IcebergSourceReader

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


class CountingCatalog(SqlCatalog):
    """A SQLite catalog that counts its table loads."""

    loads = 0

    def load_table(self, identifier: str | tuple[str, ...]) -> Table:
        self.loads += 1
        return super().load_table(identifier)


@pytest.fixture
def catalog(tmp_path: Path) -> CountingCatalog:
    catalog = CountingCatalog("c", uri=f"sqlite:///{tmp_path}/c.db",
                              warehouse=tmp_path.as_uri())
    catalog.create_namespace("ns")
    catalog.create_table("ns.a", schema=ROWS.schema).append(ROWS)
    catalog.create_table("ns.empty", schema=ROWS.schema)
    return catalog


class Clock:
    """Both clocks of :class:`ReflectedFrontiers`, moved by hand."""

    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


def _frontiers(catalog: CountingCatalog, clock: Clock) -> ReflectedFrontiers:
    readers = {name: IcebergSourceReader(cast(SparkSession, None), catalog, "c", name,
                                         f"ns.{name}") for name in ("a", "empty")}
    return ReflectedFrontiers(readers, clock=clock, monotonic=clock)


def _version(catalog: CountingCatalog) -> int:
    snapshot = catalog.load_table("ns.a").current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def test_polls_share_a_read_until_it_ages_and_a_move_is_seen(catalog: CountingCatalog) -> None:
    clock = Clock()
    frontiers = _frontiers(catalog, clock)
    frontier = {"a": _version(catalog)}
    assert frontiers.unchanged("v", ["a"]) is None  # never checked in full: no poll
    frontiers.record("v", frontier, as_of_s=clock.now_s)
    frontiers.record("w", frontier, as_of_s=clock.now_s)
    catalog.loads = 0
    clock.now_s += 1
    first = frontiers.unchanged("v", ["a"])
    assert first is not None and first.frontier == frontier and first.as_of_s == clock.now_s
    clock.now_s += VERSIONS_TTL_S / 2
    assert frontiers.unchanged("w", ["a"]) is not None
    assert catalog.loads == 1  # the two views' polls shared one read
    assert frontiers.unchanged("w", ["a"], max_age_s=0) is not None
    assert catalog.loads == 2  # another cadence reads now
    catalog.load_table("ns.a").append(ROWS)
    catalog.loads = 0
    assert frontiers.unchanged("v", ["a"], max_age_s=0) is None  # a source moved
    assert frontiers.unchanged("w", ["a"]) is None and catalog.loads == 1  # the newer read
    clock.now_s += VERSIONS_TTL_S
    assert frontiers.unchanged("w", ["a"]) is None and catalog.loads == 2  # an aged one


def test_a_view_that_committed_makes_its_readers_read_again(catalog: CountingCatalog) -> None:
    clock = Clock()
    frontiers = _frontiers(catalog, clock)
    frontiers.record("v", {"a": _version(catalog)}, as_of_s=clock.now_s)
    assert frontiers.unchanged("v", ["a"]) is not None
    catalog.load_table("ns.a").append(ROWS)  # "a" as a view's table, committed by its tick
    assert frontiers.unchanged("v", ["a"]) is not None  # within the TTL: the kept read
    frontiers.moved(["a"])
    assert frontiers.unchanged("v", ["a"]) is None


def test_a_full_check_is_due_after_30_s_or_a_failure(catalog: CountingCatalog) -> None:
    clock = Clock()
    frontiers = _frontiers(catalog, clock)
    frontier = {"a": _version(catalog)}
    frontiers.record("v", frontier, as_of_s=clock.now_s)
    clock.now_s += FULL_CHECK_EVERY_S - 1
    assert frontiers.unchanged("v", ["a"]) is not None
    clock.now_s += 2
    assert frontiers.unchanged("v", ["a"]) is None
    frontiers.record("v", frontier, as_of_s=clock.now_s)
    frontiers.forget("v")
    assert frontiers.unchanged("v", ["a"]) is None


def test_freshness_never_goes_back_and_empty_sources_are_left_out(
        catalog: CountingCatalog) -> None:
    clock = Clock()
    frontiers = _frontiers(catalog, clock)
    frontiers.record("other", {"a": _version(catalog)}, as_of_s=clock.now_s)
    assert frontiers.unchanged("other", ["a"]) is not None  # read at 1000 s, kept
    clock.now_s += VERSIONS_TTL_S / 2
    frontiers.record("v", {"a": _version(catalog)}, as_of_s=clock.now_s)
    reflected = frontiers.unchanged("v", ["a", "empty"])  # the kept read predates the check
    assert reflected is not None and reflected.frontier == {"a": _version(catalog)}
    assert reflected.as_of_s == clock.now_s
