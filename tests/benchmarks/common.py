"""What every benchmark shares: the machine, the load, peak memory, results on disk."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "benchmarks" / "results.json"
"""The results file: ``<out>/benchmarks/results.json``, with ``<out>`` ``docs`` unless
:func:`use_output` moved it; the report is ``<out>/benchmarks.md``, its plots beside the
results."""
WORK = Path(os.environ.get("BENCH_DIR", ROOT / ".bench"))
"""Scratch space: generated TPC-H data, warehouses (``BENCH_DIR`` overrides)."""
WORK.mkdir(parents=True, exist_ok=True)
(WORK / ".gitignore").write_text("*\n")  # never committed


def machine() -> dict[str, Any]:
    """The machine the run is on: CPU, cores, memory, OS, Python, Java."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu, "cores": psutil.cpu_count(logical=True),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(), "hostname": socket.gethostname(),
    }


def use_output(folder: Path) -> None:
    """Read and write the results (and the report, :mod:`tests.benchmarks.report`) under
    ``folder`` instead of ``docs``: ``folder/benchmarks/results.json``, ``folder/benchmarks.md``.
    """
    global RESULTS
    RESULTS = Path(folder).resolve() / "benchmarks" / "results.json"


def report_path() -> Path:
    """The report beside the results file: ``<out>/benchmarks.md``."""
    return RESULTS.parent.parent / "benchmarks.md"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class MemoryProbe:
    """Peak RSS of this process (the driver) and of its child processes (the JVM).

    Sampled every ``interval_s`` in a daemon thread while active; ``jvm_heap`` is read
    from the JVM's memory pools (peak since :meth:`reset_jvm_peak`) when a Spark
    session is given. ``jvm_peak`` counts the ``java`` children only, and ``total_peak`` is
    the peak of this process and them summed in one sample: the whole driver (Python and
    its JVM; in local mode the JVM holds the executors too, on a cluster they are
    elsewhere). ``children_peak`` counts every descendant, which overstates: when the JVM
    runs a command (Hadoop's local file system runs ``chmod``, ``readlink``), the forked
    copy holds, until it execs, the JVM's pages under its thread's name (``Thread-4``),
    counted a second time. ``seen`` names every child with its peak. Descendants in another
    session are not the driver's: the daemons of a cluster the benchmark started
    (``--cluster``, each in its own session) and their executors.
    """

    pid: int = field(default_factory=os.getpid)
    interval_s: float = 0.1
    driver_peak: int = 0
    children_peak: int = 0
    jvm_peak: int = 0
    total_peak: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    """Each child process name seen, with its peak RSS (bytes)."""
    _stop: threading.Event = field(default_factory=threading.Event)

    def _sample(self) -> None:
        process = psutil.Process(self.pid)
        while not self._stop.is_set():
            try:
                driver = process.memory_info().rss
                children = jvm = 0
                session = os.getsid(self.pid)
                for child in process.children(recursive=True):
                    try:
                        if os.getsid(child.pid) != session:
                            continue  # a cluster's daemon or executor
                        rss, name = child.memory_info().rss, child.name()
                    except (psutil.Error, ProcessLookupError):  # ended meanwhile
                        continue
                    children += rss
                    jvm += rss if name == "java" else 0
                    self.seen[name] = max(self.seen.get(name, 0), rss)
                self.driver_peak = max(self.driver_peak, driver)
                self.children_peak = max(self.children_peak, children)
                self.jvm_peak = max(self.jvm_peak, jvm)
                self.total_peak = max(self.total_peak, driver + jvm)
            except psutil.Error:
                pass
            self._stop.wait(self.interval_s)

    @contextmanager
    def active(self) -> Iterator[MemoryProbe]:
        """Sample while the block runs."""
        self._stop.clear()
        self.driver_peak = self.children_peak = self.jvm_peak = self.total_peak = 0
        self.seen = {}
        thread = threading.Thread(target=self._sample, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def result(self, jvm_heap_peak: int | None = None) -> dict[str, float | None]:
        """Peaks in MiB: driver RSS, child processes' RSS (the JVM, and any other child),
        the ``java`` children's alone, the driver with them (Python + JVM), JVM heap used."""
        mib = 2**20
        return {"driver_rss_mib": round(self.driver_peak / mib, 1),
                "children_rss_mib": round(self.children_peak / mib, 1),
                "jvm_rss_mib": round(self.jvm_peak / mib, 1),
                "driver_total_rss_mib": round(self.total_peak / mib, 1),
                "jvm_heap_peak_mib": None if jvm_heap_peak is None
                else round(jvm_heap_peak / mib, 1)}


def jvm_heap_pools(spark: Any) -> list[Any]:
    """The JVM's heap memory pool beans of a Spark session's driver."""
    jvm = spark.sparkContext._jvm
    pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    return [p for p in pools if str(p.getType().toString()) == "Heap memory"]


def reset_jvm_peak(spark: Any) -> None:
    """Start a new peak-heap measurement (after a GC, so the peak is this benchmark's)."""
    spark.sparkContext._jvm.java.lang.System.gc()
    for pool in jvm_heap_pools(spark):
        pool.resetPeakUsage()


def jvm_heap_peak(spark: Any) -> int:
    """Bytes: the sum of the heap pools' peak usage since :func:`reset_jvm_peak`."""
    return sum(int(p.getPeakUsage().getUsed()) for p in jvm_heap_pools(spark))


@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """Wall time of the block, in ``["s"]``, with the load average at its end."""
    out: dict[str, float] = {}
    started = time.perf_counter()
    try:
        yield out
    finally:
        out["s"] = time.perf_counter() - started


def read_results() -> dict[str, Any]:
    """The results file, or an empty one."""
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def save_part(name: str, data: Any) -> None:
    """Replace one part of the results file (others are kept)."""
    results = read_results()
    results[name] = data
    results.setdefault("machine", machine())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True, default=str) + "\n")


def process_cpu_s() -> float:
    """Seconds of CPU (user + system) used so far by this process and its live children.

    In local mode the JVM is a child of the driver, so the difference around a refresh is
    the CPU it cost on both sides: unlike wall time, it barely grows when other processes
    compete for the cores.
    """
    processes = [psutil.Process()]
    processes += processes[0].children(recursive=True)
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:  # a child that ended meanwhile
            continue
        total += times.user + times.system
    return total


def median_sample(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The sample of median wall time, with every sample's time under ``runs_s``.

    The lower median for an even count: a measured run, not an average of two.
    """
    ranked = sorted(samples, key=lambda sample: sample["s"])
    return {**ranked[(len(ranked) - 1) // 2], "runs_s": [sample["s"] for sample in samples]}


def worst_check(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Of the checks of repeated batches, the first with mismatched rows, else the last."""
    return next((c for c in checks if any(v["mismatched"] for v in c.values())), checks[-1])


def lakehouse_command(*args: str, log: Path) -> subprocess.Popen[bytes]:
    """Start ``lakehouse ARGS`` (this environment's), its output to ``log``."""
    binary = Path(sys.executable).parent / "lakehouse"
    command = [str(binary)] if binary.exists() else [sys.executable, "-m", "lakehouse.cli"]
    return subprocess.Popen(command + list(args), stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)


@contextmanager
def lakehouse_process(*args: str, log: Path,
                      stop_s: float = 60.0) -> Iterator[subprocess.Popen[bytes]]:
    """A ``lakehouse`` subprocess, stopped with SIGTERM (then SIGKILL after ``stop_s``)."""
    process = lakehouse_command(*args, log=log)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(stop_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
