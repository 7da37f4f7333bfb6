"""Catalog throughput (part 4): loadTable with and without ETag, a trivial endpoint, commits.

loadTable is the product's path: plain requests are answered by the fast path
(``catalog_api/load_table_fastpath.py``: one indexed lookup of the metadata location, 304 or
the cached body), the same answers as the route's.

Servers run in their own processes (one uvicorn worker each, as ``lakehouse serve``); the
load comes from ``wrk`` (C, Debian package) over loopback, at 1, 8 and 32 connections, so
the Python client's GIL is not what is measured. Both share the machine's two cores with
the server: the numbers are what this one machine sustains end to end.

Commits: N writer processes append one row at a time with pyiceberg to one table for a
fixed time; a commit that loses the race (409) is retried on fresh metadata.

Authentication: a second catalog process with auth on answers the same plain loadTable for
a bearer token of an admin client (``loadTable with auth``), measured in the same rounds, so
that the cost of checking the token (a cache hit after its first use) is a ratio to the open
catalog's loadTable.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pyarrow as pa

from tests.benchmarks.common import WORK, free_port, load_average
from tests.benchmarks.serve import BENCH_CLIENT, SECRET_ENV

#: The environment of the server processes: the bench client's secret (``catalog-auth``).
SERVER_ENV = {SECRET_ENV: secrets.token_urlsafe(24)}
CONNECTIONS = (1, 8, 32)
DURATION_S = 5
ROUNDS = 3
WRITERS = (1, 4, 8)
COMMIT_DURATION_S = 10
NAMESPACE, TABLE = "bench", "events"


@contextmanager
def server(kind: str, root: Path) -> Iterator[tuple[str, psutil.Process]]:
    """Start ``tests.benchmarks.serve`` and wait for it; yields its base URL and process."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tests.benchmarks.serve", kind,
                                str(root), str(port)], env={**os.environ, **SERVER_ENV})
    base = f"http://127.0.0.1:{port}"
    probe = "/ping" if kind == "trivial" else "/healthz"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + probe, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{kind} server did not start")
            time.sleep(0.1)
        yield base, psutil.Process(process.pid)
    finally:
        process.terminate()
        process.wait(10)


def wrk(url: str, connections: int, headers: dict[str, str] | None = None,
        duration_s: int = DURATION_S, server_process: psutil.Process | None = None,
        ) -> dict[str, Any]:
    """Run wrk against ``url``; requests/s, p50/p99 latency (ms) and status summary.

    With ``server_process``, also the server's CPU time (user + system, all its threads) per
    answered request, ``server_cpu_us``: unlike the rate, it hardly depends on what else
    runs on the machine.
    """
    command = ["wrk", f"-t{min(connections, 2)}", f"-c{connections}", f"-d{duration_s}s",
               "--latency", "--timeout", "10s"]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    cpu_before = sum(server_process.cpu_times()[:2]) if server_process else 0.0
    output = subprocess.run(command + [url], capture_output=True, text=True, check=True).stdout
    cpu_s = sum(server_process.cpu_times()[:2]) - cpu_before if server_process else None
    requests = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore
    latency = {p: _ms(re.search(rf"\s{p}%\s+([\d.]+\w+)", output).group(1))  # type: ignore
               for p in ("50", "99")}
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {"rps": round(rate, 1), "p50_ms": latency["50"], "p99_ms": latency["99"],
            "non_2xx_3xx": int(errors.group(1)) if errors else 0, "connections": connections,
            "load": load_average()[0], "requests": requests,
            "server_cpu_us": round(cpu_s / requests * 1e6, 1) if cpu_s and requests else None}


def _ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(\w+)", text).groups()  # type: ignore[union-attr]
    return round(float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit], 3)


def _bearer(uri: str) -> dict[str, str]:
    """The ``Authorization`` header of the bench client of a ``catalog-auth`` server."""
    response = httpx.post(f"{uri}/v1/oauth/tokens", data={
        "grant_type": "client_credentials", "client_id": BENCH_CLIENT,
        "client_secret": SERVER_ENV[SECRET_ENV]})
    response.raise_for_status()
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def _table_with_history(uri: str, commits: int = 10, credential: str | None = None) -> None:
    """A table with ``commits`` snapshots (a realistic metadata document)."""
    from pyiceberg.catalog.rest import RestCatalog

    properties = {"credential": credential} if credential else {}
    catalog = RestCatalog("bench", uri=uri, **properties)
    catalog.create_namespace(NAMESPACE)
    rows = pa.table({"id": pa.array([0], pa.int64()), "note": ["x"]})
    table = catalog.create_table(f"{NAMESPACE}.{TABLE}", schema=rows.schema)
    for _ in range(commits):
        table.append(rows)


def load_table(root: Path) -> dict[str, Any]:
    """loadTable (plain, If-None-Match -> 304, through the route) and the trivial endpoint.

    Both servers run side by side and, at each connection count, the four are measured one
    right after the other, so that they see similar background load (the ratios to the
    trivial endpoint are the result); ``ROUNDS`` such rounds, each row keeps its median run
    (all rates in ``rps_runs``). The answers are checked first: a 304 for the ETag, and the
    same body and ETag from the route (an extra query parameter sends the request there).
    """
    out: dict[str, Any] = {"load_table": [], "load_table_etag": [], "load_table_route": [],
                           "load_table_auth": [], "trivial": []}
    with server("catalog", root / "catalog") as (base, process), \
            server("catalog-auth", root / "catalog-auth") as (auth_base, auth_process), \
            server("trivial", root / "trivial") as (trivial_base, trivial_process):
        uri, auth_uri = f"{base}/iceberg", f"{auth_base}/iceberg"
        _table_with_history(uri)
        _table_with_history(auth_uri, credential=f"{BENCH_CLIENT}:{SERVER_ENV[SECRET_ENV]}")
        url = f"{uri}/v1/namespaces/{NAMESPACE}/tables/{TABLE}"
        auth_url = f"{auth_uri}/v1/namespaces/{NAMESPACE}/tables/{TABLE}"
        bearer = _bearer(auth_uri)
        assert httpx.get(auth_url).status_code == 401
        assert httpx.get(auth_url, headers=bearer).status_code == 200
        first = httpx.get(url)
        etag = first.headers["etag"]
        assert httpx.get(url, headers={"If-None-Match": etag}).status_code == 304
        routed = httpx.get(url, params={"route": "1"})
        assert (routed.content, routed.headers["etag"]) == (first.content, etag)
        out["metadata_bytes"] = len(first.content)
        series = {"load_table": (url, {}, process),
                  "load_table_etag": (url, {"If-None-Match": etag}, process),
                  "load_table_route": (f"{url}?route=1", {}, process),
                  "load_table_auth": (auth_url, bearer, auth_process),
                  "trivial": (f"{trivial_base}/ping", {}, trivial_process)}
        for target, headers, _ in series.values():
            wrk(target, 8, headers, duration_s=2)  # warm-up
        runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for _ in range(ROUNDS):
            for connections in CONNECTIONS:
                for name, (target, headers, owner) in series.items():
                    runs.setdefault((name, connections), []).append(
                        wrk(target, connections, headers, server_process=owner))
        for (name, connections), measured in runs.items():
            out[name].append(_median_run(measured, runs[("trivial", connections)]))
        out["catalog_server_rss_mib"] = round(process.memory_info().rss / 2**20, 1)
        out["commits"] = commits(uri)
    return out


def _median_run(runs: list[dict[str, Any]], trivial: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate, plus every run's rate (``rps_runs``), the median of the
    rate ratios to the trivial endpoint's run of the same round (``share_of_trivial``) and
    the median server CPU per request (``server_cpu_us``)."""
    median = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]
    shares = [r["rps"] / t["rps"] for r, t in zip(runs, trivial, strict=True)]
    cpu = [r["server_cpu_us"] for r in runs if r["server_cpu_us"] is not None]
    return {**median, "rps_runs": [r["rps"] for r in runs],
            "share_of_trivial": round(statistics.median(shares), 3),
            "server_cpu_us": statistics.median(cpu) if cpu else None}


class _RetryCounter(logging.Handler):
    """Counts pyiceberg's own commit retries (it retries a 409 itself, with back-off)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "concurrent update" in record.getMessage():
            self.count += 1


def _writer(uri: str, ready: Any, go: Any, duration_s: float, queue: Any) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    retries = _RetryCounter()
    logging.getLogger("pyiceberg").addHandler(retries)
    logging.getLogger("pyiceberg").propagate = False
    catalog = RestCatalog("bench", uri=uri)
    rows = pa.table({"id": pa.array([1], pa.int64()), "note": ["w"]})
    catalog.load_table(f"{NAMESPACE}.{TABLE}")  # imports and connections warmed up
    done = conflicts = 0
    latencies = []
    ready.put(True)
    go.wait()
    stop_at = time.perf_counter() + duration_s
    while time.perf_counter() < stop_at:
        started = time.perf_counter()
        try:
            catalog.load_table(f"{NAMESPACE}.{TABLE}").append(rows)
            done += 1
            latencies.append(time.perf_counter() - started)
        except CommitFailedException:
            conflicts += 1
    queue.put((done, conflicts + retries.count, latencies))


def commits(uri: str) -> list[dict[str, Any]]:
    """Commit throughput on one table with 1, 4 and 8 concurrent writer processes."""
    out = []
    context = mp.get_context("spawn")
    for writers in WRITERS:
        queue, ready, go = context.Queue(), context.Queue(), context.Event()
        processes = [context.Process(target=_writer,
                                     args=(uri, ready, go, COMMIT_DURATION_S, queue))
                     for _ in range(writers)]
        for process in processes:
            process.start()
        for _ in processes:
            ready.get(timeout=120)
        go.set()
        results = [queue.get(timeout=120) for _ in processes]
        for process in processes:
            process.join(30)
        done = sum(r[0] for r in results)
        latencies = sorted(x for r in results for x in r[2])
        out.append({"writers": writers, "commits": done,
                    "conflicts_retried": sum(r[1] for r in results),
                    "commits_per_s": round(done / COMMIT_DURATION_S, 1),
                    "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1) if latencies
                    else None, "load": load_average()[0]})
    return out


def run() -> dict[str, Any]:
    """The catalog part of the results."""
    root = WORK / "catalog_run"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return load_table(root)
