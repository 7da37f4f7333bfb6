"""Backfill: a new view over large existing sources loads a snapshot, then follows the feed.

The initial load reads the sources at the versions it chose when it started; commits that
land while it runs (made here from inside its compute phase, through the progress hook)
and after it are read by the next tick's change feeds, exactly once. The view keeps
duplicates (no key), so a change applied twice or lost would show in the multiset.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession
from rich.console import Console

from ivm import SourceInput, recompute
from lakehouse.config import ViewConfig, parse_config
from lakehouse.progress import Phase, reporting
from lakehouse.progress_display import ProgressDisplay
from lakehouse.runtime import Runtime
from lakehouse.spark.arrow import to_arrow
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

ROWS = 100_000
SQL = ("SELECT f.carrier, f.flight, f.dep_delay, a.name FROM flights f "
       "JOIN airlines a ON f.carrier = a.carrier")


def _rows(table: pa.Table) -> Counter[tuple[object, ...]]:
    return multiset(tuple(r.values()) for r in table.to_pylist())


def _recompute_at(runtime: Runtime, view: ViewConfig, frontier: dict[str, int]) -> pa.Table:
    """The view over its sources at ``frontier`` (the oracle for a past version)."""
    plan = runtime.plan(view)
    inputs = {s: SourceInput(runtime.readers[s].snapshot(frontier[s])) for s in plan.sources}
    return to_arrow(recompute(plan, inputs))


class CommitsDuringTheLoad:
    """A reporter that records phases and, when the load computes, commits to the sources.

    It forwards every phase to a plain-text :class:`ProgressDisplay` as the CLI would.
    """

    def __init__(self, spark: SparkSession, flights: str, airlines: Path, display: object):
        self.spark, self.flights, self.airlines = spark, flights, airlines
        self.display = display
        self.phases: list[Phase] = []
        self.committed = False

    def phase(self, event: Phase) -> None:
        self.phases.append(event)
        self.display.phase(event)  # type: ignore[attr-defined]
        if event.name == "compute view" and not self.committed:
            self.committed = True
            self.spark.sql(f"INSERT INTO {self.flights} VALUES ('AA', 1, 1.0), "
                           f"('UA', {ROWS + 1}, 2.0)")  # flight 1 twice from now on
            DeltaTable(str(self.airlines)).update({"name": "'United Airlines'"},
                                                  predicate="carrier = 'UA'")

    def rows(self, event: Phase) -> None:
        self.phases[-1] = event
        self.display.rows(event)  # type: ignore[attr-defined]


def test_snapshot_load_then_follow_with_commits_during_and_after(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    catalog_namespace: str, tmp_path: Path,
) -> None:
    flights = f"lakehouse.{catalog_namespace}.flights"
    spark.sql(f"CREATE TABLE {flights} (carrier string, flight int, dep_delay double) "
              "USING iceberg TBLPROPERTIES ('format-version' = '2')")
    spark.range(ROWS).selectExpr(
        "element_at(array('AA', 'UA', 'DL'), CAST(id % 3 AS INT) + 1) AS carrier",
        "CAST(id + 1 AS INT) AS flight", "CAST(id % 97 AS DOUBLE) AS dep_delay",
    ).writeTo(flights).append()
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA", "DL"],
                                             "name": ["American", "United", "Delta"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    runtime = Runtime(parse_config({
        "warehouse": str(catalog_server.warehouse),
        "catalog": {"embedded": False, "uri": catalog_server.uri},
        "sources": {"flights": {"iceberg": f"{catalog_namespace}.flights"},
                    "airlines": {"delta": str(airlines)}},
        "views": [{"name": f"{catalog_namespace}.joined", "sql": SQL, "refresh": "auto"}],
    }))
    view = runtime.config.views[0]
    before = {"flights": runtime.readers["flights"].current_version(),
              "airlines": runtime.readers["airlines"].current_version()}

    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, force_terminal=False, width=200), {view.name: 4})
    reporter = CommitsDuringTheLoad(spark, flights, airlines, display)
    with display, reporting(reporter):
        load = runtime.refresh(view)
    assert (load.mode, load.frontier) == ("full", before)
    assert (load.reason or "").startswith("initial load")
    assert load.rows_out == ROWS
    assert [(p.name, p.rows) for p in reporter.phases] == [
        ("read sources", None), ("compute view", ROWS), ("sink commits", ROWS)]
    assert all((p.detail or "").startswith("initial load") for p in reporter.phases[1:])
    assert f"{view.name}: sink commits (initial load: the sink has no frontier yet), " \
           f"{ROWS:,} rows" in out.getvalue()

    # The load is the snapshot at the versions it started from: without the commits it ran
    # alongside, in both sinks.
    at_load = _rows(_recompute_at(runtime, view, before))
    iceberg = _rows(rest_catalog.load_table(view.name).scan().to_arrow())
    assert iceberg == at_load == _rows(DeltaTable(runtime.delta_uri(view)).to_pyarrow_table())
    assert iceberg[("AA", 1, 0.0, "American")] == 1 and ("UA", ROWS + 1, 2.0, "United") not in (
        iceberg)

    spark.sql(f"DELETE FROM {flights} WHERE flight = 2")  # and one more commit after the load
    follow = runtime.refresh(view)
    assert follow.mode == "incremental", follow.reason
    assert follow.rows_in == 2 + 2 + 1  # two inserts, the update's -1/+1, one delete
    expected = _rows(runtime.recompute(view))
    iceberg = _rows(rest_catalog.load_table(view.name).scan().to_arrow())
    assert iceberg == expected == _rows(DeltaTable(runtime.delta_uri(view)).to_pyarrow_table())
    assert iceberg[("AA", 1, 1.0, "American")] == 1 and iceberg[("AA", 1, 0.0, "American")] == 1
    assert iceberg[("UA", ROWS + 1, 2.0, "United Airlines")] == 1
    assert sum(iceberg.values()) == ROWS + 2 - 1
    assert runtime.refresh(view).mode == "skipped"
