"""A child process that refreshes one view each time its test says so (its own Spark JVM).

Usage: ``python -m tests.integration.refresh_worker CONFIG VIEW FOLDER NAME [FIRST_ROUND]``

The test and the worker talk through files in FOLDER: the worker writes ``NAME.ready``
(its start-up time) once its Runtime is up; for each round r (from FIRST_ROUND, default 0)
it waits for ``go-r``, touches ``NAME.started-r``, refreshes VIEW (retrying a failed
refresh up to :data:`ATTEMPTS` times), appends one JSON line per attempt to
``NAME.jsonl`` and touches ``NAME.done-r``; it exits when ``stop`` appears. Starting one
JVM for many refreshes is what makes multi-process tests affordable on a small machine.
Failpoints (``LAKEHOUSE_FAILPOINTS``) apply, so a crash test can kill it mid-round.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ivm import IvmError
from lakehouse.config import load_config
from lakehouse.errors import LakehouseError
from lakehouse.runtime import Runtime

ATTEMPTS = 5
POLL_S = 0.05


def _wait(folder: Path, round_: int) -> bool:
    """Wait for ``go-<round_>`` (True) or ``stop`` (False)."""
    while True:
        if (folder / f"go-{round_}").exists():
            return True
        if (folder / "stop").exists():
            return False
        time.sleep(POLL_S)


def _refresh(runtime: Runtime, view_name: str, round_: int, log: Path) -> None:
    """Refresh until it succeeds (or :data:`ATTEMPTS` fail); log every attempt."""
    view = runtime.config.view(view_name)
    log.with_name(f"{log.stem}.started-{round_}").touch()
    for attempt in range(ATTEMPTS):
        record: dict[str, object] = {"round": round_, "attempt": attempt}
        started = time.perf_counter()
        try:
            result = runtime.refresh(view)
            record.update(ok=True, mode=result.mode, sinks=sorted(result.sinks),
                          frontier=result.frontier)
        except (LakehouseError, IvmError) as error:
            record.update(ok=False, error=str(error), type=type(error).__name__,
                          sinks=sorted(getattr(error, "committed", ())))
        record["duration_s"] = round(time.perf_counter() - started, 2)
        with log.open("a") as out:
            out.write(json.dumps(record) + "\n")
        if record["ok"]:
            return


def main(argv: list[str]) -> None:
    """Run the worker (see the module docstring)."""
    config_path, view_name, folder_name, name = argv[:4]
    folder = Path(folder_name)
    started = time.perf_counter()
    runtime = Runtime(load_config(Path(config_path)))
    runtime.plan(runtime.config.view(view_name))
    runtime.spark.sql("SELECT 1").collect()  # warm: the first job is the slowest
    (folder / f"{name}.ready").write_text(f"{time.perf_counter() - started:.2f}")
    round_ = int(argv[4]) if len(argv) > 4 else 0
    while _wait(folder, round_):
        _refresh(runtime, view_name, round_, folder / f"{name}.jsonl")
        (folder / f"{name}.done-{round_}").touch()
        round_ += 1
    runtime.close()


if __name__ == "__main__":
    main(sys.argv[1:])
