import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from ivm import DRIVER_READ_MAX_ROWS
from lakehouse.config import parse_config
from lakehouse.memory import ReleaseAfterWork, memory_limit_bytes, releasing_freed_memory

MACHINE = psutil.virtual_memory().total


def _files(tmp_path: Path, *contents: str) -> list[Path]:
    paths = [tmp_path / f"limit{i}" for i in range(len(contents))]
    for path, text in zip(paths, contents, strict=True):
        path.write_text(text)
    return paths


def test_a_container_limit_below_the_machine_wins(tmp_path: Path) -> None:
    assert memory_limit_bytes(_files(tmp_path, f"{MACHINE // 8}\n")) == MACHINE // 8
    assert memory_limit_bytes(_files(tmp_path, "max\n", f"{MACHINE // 2}")) == MACHINE // 2


@pytest.mark.parametrize("stated", ["max\n", f"{2 * MACHINE}\n", "", "garbage"])
def test_no_limit_or_a_larger_one_leaves_the_machine_memory(tmp_path: Path, stated: str) -> None:
    assert memory_limit_bytes(_files(tmp_path, stated)) == MACHINE


def test_a_missing_file_states_no_limit(tmp_path: Path) -> None:
    assert memory_limit_bytes([tmp_path / "missing"]) == MACHINE


def test_the_column_cache_and_the_driver_read_limit_follow_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("lakehouse.config.memory_limit_bytes", lambda: 8 << 30)
    config = parse_config({})
    assert config.column_cache_bytes == 2 << 30  # a quarter of 8 GiB
    assert config.driver_read_max_rows == 33_554_432  # 2 GiB / 64 bytes a row
    monkeypatch.setattr("lakehouse.config.memory_limit_bytes", lambda: 1 << 30)
    assert parse_config({}).driver_read_max_rows == DRIVER_READ_MAX_ROWS  # the floor
    assert parse_config({"column_cache_bytes": 0}).driver_read_max_rows == DRIVER_READ_MAX_ROWS
    assert parse_config({"column_cache_bytes": 64 << 30}).column_cache_bytes == 64 << 30


CHURN = """
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.memory import ReleaseAfterWork, releasing_freed_memory

kept = []


def churn(seed: int) -> None:  # arrays of up to 2 MiB built and dropped, one in 15 kept
    sizes = np.random.default_rng(seed).integers(1_000, 250_000, 200)
    built = [pc.multiply(pc.random(int(n)), 2.0) for n in sizes]
    kept.extend(built[::15])


process = psutil.Process()
with ThreadPoolExecutor(4) as pool:  # alive throughout, as the scheduler's workers are
    list(pool.map(churn, range(8)))
    held = process.memory_info().rss
    with releasing_freed_memory(every_s=0.1):  # from a thread of its own
        time.sleep(0.5)
    released = process.memory_info().rss
    barrier = threading.Barrier(4)  # each worker runs one of the jobs
    list(pool.map(ReleaseAfterWork().after(lambda _: barrier.wait()), range(4)))
    print(held, released, process.memory_info().rss, pa.total_allocated_bytes())
"""


def test_releasing_gives_back_what_the_arrow_pool_freed() -> None:
    """RSS of a process whose four threads built and dropped Arrow arrays: before, after
    half a second of :func:`releasing_freed_memory`, after a job on each worker released
    (:class:`ReleaseAfterWork`); and Arrow's live bytes."""
    out = subprocess.run([sys.executable, "-c", CHURN], check=True, capture_output=True,
                         text=True).stdout
    held, released, by_workers, live = (int(n) for n in out.split())
    assert held - live > 200 << 20  # the pool held far more than its live arrays
    assert released < held - (held - live) // 2  # most of what it held for reuse is back
    assert by_workers < released - (20 << 20)  # and what the workers' heaps kept


def test_a_worker_releases_after_its_work_at_most_every_period() -> None:
    now = [0.0]
    released: list[str] = []
    after = ReleaseAfterWork(10.0, lambda: released.append(threading.current_thread().name),
                             clock=lambda: now[0])
    job = after.after(lambda item: None)
    job(1)
    job(2)  # within the period: no release
    assert released == ["MainThread"]
    now[0] = 10.0
    job(3)
    assert released == ["MainThread"] * 2
    other = threading.Thread(target=job, args=(4,), name="worker")
    other.start()
    other.join()
    assert released[-1] == "worker"  # each thread on its own period


def test_a_failed_job_or_release_still_releases_or_logs() -> None:
    calls: list[int] = []

    def release() -> None:
        calls.append(1)
        raise RuntimeError("release failed")

    def job(item: int) -> None:
        raise ValueError(item)

    with pytest.raises(ValueError):
        ReleaseAfterWork(10.0, release).after(job)(7)
    assert calls == [1]  # released after the failed job; its own error only logged


def test_releasing_runs_on_its_cadence_and_outlives_a_failed_release() -> None:
    calls: list[float] = []

    def release() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("first release fails")

    with releasing_freed_memory(every_s=0.02, release=release):
        deadline = time.monotonic() + 10
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    count = len(calls)
    assert count >= 3  # the failed first release did not stop the thread
    time.sleep(0.1)
    assert len(calls) == count  # none after the block
