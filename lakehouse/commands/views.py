"""``lakehouse`` view commands: refresh, suspend, resume, history, status, explain, wait, maintain.

Each goes through :class:`lakehouse.api.Pipeline`, the Python API; ``--json`` prints what
it returns as JSON on stdout (for orchestrators: Airflow, Dagster, cron).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from lakehouse.commands.common import (
    ConfigOption,
    JsonOption,
    app,
    console,
    fail,
    json_value,
    load,
    progress,
)
from lakehouse.config import duration_s
from lakehouse.errors import ConfigError, LakehouseError

if TYPE_CHECKING:
    from lakehouse.api import Pipeline, RefreshSummary
    from lakehouse.maintenance import MaintenanceResult
    from lakehouse.status import ViewStatus

FullOption = Annotated[bool, typer.Option(
    "--full", help="Recompute the view and swap its content in one commit per sink.")]


def _pipeline(config: Path, *, read_only: bool = False) -> Pipeline:
    """The pipeline of ``config``; ``read_only`` reads an embedded catalog without serving it."""
    from lakehouse.api import Pipeline

    return Pipeline(load(config), read_only=read_only)


@app.command()
def refresh(view: str, config: ConfigOption = Path("lakehouse.yaml"),
            full: FullOption = False, as_json: JsonOption = False) -> None:
    """Refresh one view now (after the views it reads), even a suspended one."""
    from ivm import IvmError

    try:
        with _pipeline(config) as pipeline:
            pipeline.config.view(view)  # an unknown view fails before anything starts
            with progress(pipeline.runtime, quiet=as_json):
                summary = pipeline.refresh(view, full=full)
    except (LakehouseError, IvmError) as error:
        raise fail(error) from None
    if as_json:
        print(json.dumps(asdict(summary)))
    else:
        _print_summary(summary)


def _print_summary(summary: RefreshSummary) -> None:
    reason = f" ({summary.reason})" if summary.reason else ""
    console.print(f"{summary.view}: {summary.mode} in {summary.duration_s:.2f} s; "
                  f"frontier {summary.frontier}{reason}", markup=False)
    if summary.mode != "skipped":
        console.print(f"engine: {summary.engine} ({summary.engine_reason})", markup=False)
    if summary.suspended_since:
        console.print(f"{summary.view} stays suspended (since {summary.suspended_since}): "
                      f"lakehouse resume {summary.view}", markup=False)


@app.command(hidden=True)
def tick(view: str, config: ConfigOption = Path("lakehouse.yaml"),
         full: FullOption = False, as_json: JsonOption = False) -> None:
    """Refresh one view now: ``lakehouse refresh VIEW``, by its former name."""
    refresh(view, config, full, as_json)


@app.command()
def suspend(view: str, config: ConfigOption = Path("lakehouse.yaml")) -> None:
    """Stop refreshing a view on its schedule (persisted; ``resume`` undoes it)."""
    _set_suspended(view, config, suspended=True)


@app.command()
def resume(view: str, config: ConfigOption = Path("lakehouse.yaml")) -> None:
    """Refresh a suspended view on its schedule again."""
    _set_suspended(view, config, suspended=False)


def _set_suspended(view: str, config: Path, *, suspended: bool) -> None:
    try:
        with _pipeline(config) as pipeline:
            (pipeline.suspend if suspended else pipeline.resume)(view)
            name = pipeline.config.view(view).name
    except LakehouseError as error:
        raise fail(error) from None
    console.print(f"{name}: {'suspended' if suspended else 'resumed'}", markup=False)


@app.command()
def history(
    view: Annotated[str | None, typer.Argument(help="Only this view's refreshes.")] = None,
    config: ConfigOption = Path("lakehouse.yaml"),
    limit: Annotated[int, typer.Option(min=1, help="Newest refreshes shown.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Show the recorded refreshes, newest first (the history table in the catalog)."""
    try:
        with _pipeline(config) as pipeline:
            rows = pipeline.history(view, limit).to_pylist()
    except LakehouseError as error:
        raise fail(error) from None
    if as_json:
        print(json.dumps(rows, default=json_value))
        return
    table = Table("view", "started", "s", "mode", "engine", "rows in", "rows out",
                  "reason or error")  # the frontiers (long snapshot ids) are in --json
    for row in rows:
        started = row["started_at"].astimezone().strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(*(Text(str(value)) for value in (
            row["view"], started, f"{row['duration_s']:.2f}", row["mode"], row["engine"] or "-",
            row["rows_in"] if row["rows_in"] is not None else "-",
            row["rows_out"] if row["rows_out"] is not None else "-",
            row["error"] or row["reason"] or "")))
    console.print(table)


@app.command()
def status(config: ConfigOption = Path("lakehouse.yaml"), as_json: JsonOption = False) -> None:
    """Show each view's frontier, last refresh (and its engine), lag, rows, and why it stopped."""
    try:
        with _pipeline(config) as pipeline:
            states = pipeline.status()
    except LakehouseError as error:
        raise fail(error) from None
    if as_json:
        print(json.dumps([asdict(state) for state in states]))
        return
    targets = any(state.target_lag for state in states)  # the column only when one has one
    table = Table("view", "frontier", "last refresh", "engine", "lag",
                  *(["target"] if targets else []), "rows", "behind", "state")
    notes: list[Text] = []
    for state in states:
        refreshed = "never"
        if state.refreshed_at_ms:
            refreshed = datetime.fromtimestamp(state.refreshed_at_ms / 1000).isoformat(
                " ", "seconds")
        lag = "fresh" if state.lag_s == 0 else (f"{state.lag_s:.0f} s" if state.lag_s else "-")
        table.add_row(state.view, str(state.frontier or "-"), refreshed, state.engine or "-",
                      lag, *([state.target_lag or "-"] if targets else []),
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
    """``ok``, ``stopped`` (red; the reason below the table), or the degraded reason."""
    if state.stopped:
        return Text("stopped", style="red")
    return Text(state.degraded, style="yellow") if state.degraded else "ok"


@app.command()
def explain(view: str, config: ConfigOption = Path("lakehouse.yaml"),
            as_json: JsonOption = False) -> None:
    """Show how each part of a view is maintained (laws, keys, state read)."""
    from ivm import IvmError

    try:
        with _pipeline(config, read_only=True) as pipeline:
            if as_json:
                print(json.dumps(pipeline.explain_tree(view)))
            else:
                console.print(pipeline.explain(view), markup=False, highlight=False,
                              soft_wrap=True)  # laws are in [brackets]
    except (LakehouseError, IvmError) as error:
        raise fail(error) from None


@app.command()
def wait(
    view: str,
    source: Annotated[str, typer.Option(
        "--source", help="NAME=SNAPSHOT: a source the view reads, and its snapshot id "
                         "(Iceberg) or version (Delta) that must be reflected.")],
    config: ConfigOption = Path("lakehouse.yaml"),
    timeout: Annotated[str, typer.Option(help="How long to wait at most (30s, 5m).")] = "60s",
    as_json: JsonOption = False,
) -> None:
    """Wait until a view reflects a source's snapshot; print the view's snapshot that first does."""
    try:
        name, _, version = source.partition("=")
        timeout_s = duration_s(timeout)
        if not version.lstrip("-").isdigit():
            raise ConfigError(f"expected NAME=SNAPSHOT, got {source!r}", key="--source")
        if timeout_s is None:
            raise ConfigError(f"expected a duration like 60s, got {timeout!r}", key="--timeout")
        with _pipeline(config) as pipeline:
            snapshot_id = pipeline.wait(view, name, int(version), timeout_s)
    except LakehouseError as error:
        raise fail(error) from None
    print(json.dumps({"view": view, "snapshot_id": snapshot_id}) if as_json else snapshot_id)


@app.command()
def maintain(
    view: Annotated[str | None, typer.Argument(help="Only this view (default: every view).")]
    = None,
    config: ConfigOption = Path("lakehouse.yaml"),
    as_json: JsonOption = False,
) -> None:
    """Compact view tables; expire snapshots no downstream view or subscriber still reads."""
    try:
        with _pipeline(config) as pipeline:
            names = [pipeline.config.view(view).name] if view else [
                v.name for v in pipeline.config.views]
            results = [pipeline.maintain(name) for name in names]
    except LakehouseError as error:
        raise fail(error) from None
    if as_json:
        found = [asdict(result) for result in results]
        print(json.dumps(found[0] if view else found))
        return
    for result in results:
        _print_maintenance(result)


def _print_maintenance(result: MaintenanceResult) -> None:
    console.print(
        f"{result.view}: {result.snapshots_expired} snapshots expired "
        f"({result.files_deleted} files deleted); data files {result.data_files_before} -> "
        f"{result.data_files_after}; Delta files {result.delta_files_before} -> "
        f"{result.delta_files_after}, {result.delta_files_removed} vacuumed; "
        f"{result.duration_s:.2f} s", markup=False)
    for snapshot_id, holders in sorted(result.held.items()):
        console.print(f"  kept {snapshot_id} and later: {', '.join(holders)}", markup=False)
