"""The ``lakehouse`` app, its console and options, and how commands report errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from lakehouse.config import Config, load_config
from lakehouse.errors import LakehouseError

if TYPE_CHECKING:
    from pyspark import SparkContext

    from lakehouse.progress_display import ProgressDisplay
    from lakehouse.runtime import Runtime

app = typer.Typer(
    help="Keep SQL views over Iceberg and Delta tables fresh, incrementally.",
    no_args_is_help=True, pretty_exceptions_enable=False,
)
console = Console(width=None if sys.stdout.isatty() else 120)
ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="Path of lakehouse.yaml.", envvar="LAKEHOUSE_CONFIG")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for orchestrators).")]


def load(path: Path) -> Config:
    """The config at ``path``; an invalid one is printed as an error (exit code 2)."""
    try:
        return load_config(path)
    except LakehouseError as error:
        print_error(error)
        raise typer.Exit(2) from None


def fail(error: Exception) -> typer.Exit:
    """Print ``error`` (with its traceback when ``LAKEHOUSE_DEBUG`` is set); exit code 1."""
    if os.environ.get("LAKEHOUSE_DEBUG"):
        from rich.traceback import Traceback

        console.print(Traceback.from_exception(type(error), error, error.__traceback__))
    print_error(error)
    return typer.Exit(1)


def print_error(error: object) -> None:
    """Print ``error: <message>``, the message as is.

    Rich would read a ``[word]`` in it as markup and drop it.
    """
    console.print(Text.assemble(("error:", "red"), f" {error}"))


def json_value(value: object) -> str:
    """JSON for what :func:`json.dumps` does not take: datetimes as ISO 8601."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


@contextmanager
def progress(runtime: Runtime, quiet: bool = False) -> Iterator[ProgressDisplay | None]:
    """Show the phases of the refreshes run in the block (a bar; lines for backfills).

    ``quiet`` shows nothing (stdout carries JSON).
    """
    from lakehouse.progress import PHASES_PER_GROUP, reporting
    from lakehouse.progress_display import ProgressDisplay

    if quiet:
        yield None
        return

    phases = {view.name: PHASES_PER_GROUP for view in runtime.config.views}
    def context() -> SparkContext | None:  # no task counts before a tick starts Spark
        return runtime.session.sparkContext if runtime.session.started else None

    with ProgressDisplay(console, phases, context) as display, reporting(display):
        yield display
