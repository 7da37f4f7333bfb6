"""Soak (issue 19): ten views kept fresh for ten minutes while a source commits every second.

The real deployment, as in the freshness part: ``lakehouse serve`` runs the catalog and
``lakehouse run`` maintains the views, each its own process. This process loads the
sources (TPC-H SF 1 tables, through pyiceberg), then a writer thread commits a slice of
``lineitem`` (about :data:`COMMIT_ROWS` rows of whole orders) to the ``events`` source every
second, every :data:`DELETE_EVERY`-th commit a delete of an earlier commit's orders
instead, and every minute expires the source's snapshots older than three minutes that no
view still reflects (a producer's maintenance).

Eight fast views over ``events``, ``target_lag: 5s`` and refreshed ``on_change``
(``--soak-every``): aggregates by sums and counts (filtered, joined with the small
``supplier``, ``nation`` and ``part``, one read by another view), which the local engine
maintains. (Fast views whose ticks run on Spark - a filter, a join without aggregate,
MIN/MAX, COUNT DISTINCT - took about 12 s a tick here with four at once on two cores, and
missed a 5 s target even without slow views.) Two slow views (``refresh: full``, ``engine:
spark``, ``target_lag: 60s``, so refreshed every 30 s less their duration) recompute joins
of SF 1 ``lineitem`` and ``orders`` (one with ``part`` too, the other writing 1.2 million
rows) and read ``events``, so they are always due. Since a full refresh computes no change
feed, the former pair (a join of two tables, 600,000 rows written) took 8-10 s a refresh
beside the fast views (``workers: 4``), under the 10 s the issue asks of a slow view.
(A ``COUNT(DISTINCT)`` and twice the rows once made them 60 s beside the others,
starving the fast views of CPU.) Every view has both sinks (Iceberg and Delta).

Measured after the warm-up (``--soak-warmup-s``, counted from when every view first
committed): each view's lag, sampled every 0.15 s from the catalog (see
:mod:`tests.benchmarks.soak_probes`), its p50/p99/max and SLO compliance (share of the
time within target); each view's refreshes from the pipeline's refresh history; the RSS of
the ``lakehouse run`` process and of its JVM every 5 s, and their growth once the number of
snapshots in the source's metadata stays between bounds (after the writer's first expiry,
about four minutes in: until then each commit adds a snapshot that every refresh's metadata
parse carries). Goals: fast views SLO ≥ 0.99 and p99 lag ≤ 2 s, slow refreshes over 10 s, no RSS
growth after the warm-up.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pyiceberg.catalog.rest import RestCatalog

from tests.benchmarks.common import WORK, free_port, lakehouse_process, load_average
from tests.benchmarks.freshness import _ok, _wait
from tests.benchmarks.soak_probes import (
    RSS_EVERY_S,
    LagPoller,
    RssSampler,
    Slices,
    SourceLog,
    Writer,
    growth,
    lag_per_second,
    lag_stats,
    metrics,
)
from tests.benchmarks.tpch_refresh import generate_cached

SCALE_FACTOR = 1.0
EVENTS_ROWS = 600_000
"""``lineitem`` rows in ``events`` before the soak (SF 0.1's worth); the commits append
the rows after them."""
COMMIT_ROWS = 200
DELETE_EVERY = 30
WORKERS = 4
"""``workers:`` written into the config when :class:`lakehouse.config.Config` has the key."""
FAST_TARGET, SLOW_TARGET = "5s", "60s"
MAINTENANCE = {"every": "2m", "retain_for": "1m", "keep_snapshots": 5}
"""View-table maintenance during the soak: expiry and compaction run beside the ticks."""
RSS_KEYS = ("python_mib", "jvm_mib", "catalog_mib")
"""The processes whose RSS is sampled: ``lakehouse run``'s Python and JVM, the catalog."""
GOALS = {"slo": 0.99, "p99_lag_s": 2.0, "slow_refresh_s": 10.0, "rss_growth": 0.05}
"""Fast views' SLO and p99 lag; the slow views' refreshes longer than this; RSS growth (last
minute against first) at most this share, from the later of the warm-up's end and the source's
first snapshot expiry (:func:`rss_since_s`)."""
BUILD_TIMEOUT_S = 1800.0
NS = "soak"
SOURCES = {"events": "src.events", "supplier": "src.supplier", "nation": "src.nation",
           "part": "src.part", "big_lineitem": "src.big_lineitem",
           "big_orders": "src.big_orders"}
FAST_VIEWS = {
    "f_q1": "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, "
            "SUM(l_extendedprice) AS sum_base_price, "
            "SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price, "
            "AVG(l_discount) AS avg_disc, COUNT(*) AS count_order FROM events "
            "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus",
    "f_big_lines": "SELECT l_suppkey, COUNT(*) AS line_count, SUM(l_quantity) AS qty "
                   "FROM events WHERE l_quantity >= 45 GROUP BY l_suppkey",
    "f_nation": "SELECT n.n_name, COUNT(*) AS line_count, SUM(e.l_extendedprice) AS revenue "
                "FROM events e JOIN supplier s ON e.l_suppkey = s.s_suppkey "
                "JOIN nation n ON s.s_nationkey = n.n_nationkey GROUP BY n.n_name",
    "f_part_types": "SELECT p.p_brand, p.p_type, COUNT(*) AS line_count, "
                    "SUM(e.l_extendedprice) AS revenue FROM events e "
                    "JOIN part p ON e.l_partkey = p.p_partkey GROUP BY p.p_brand, p.p_type",
    "f_brand": "SELECT p_brand, SUM(line_count) AS line_count, SUM(revenue) AS revenue "
               "FROM part_types GROUP BY p_brand",
    "f_sizes": "SELECT p.p_size, COUNT(*) AS line_count, SUM(e.l_quantity) AS qty "
               "FROM events e JOIN part p ON e.l_partkey = p.p_partkey "
               "WHERE p.p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') "
               "GROUP BY p.p_size",
    "f_daily": "SELECT l_shipdate, SUM(l_quantity) AS qty, COUNT(*) AS line_count "
               "FROM events GROUP BY l_shipdate",
    "f_modes": "SELECT l_shipmode, l_shipinstruct, COUNT(*) AS line_count, SUM(l_tax) AS tax "
               "FROM events GROUP BY l_shipmode, l_shipinstruct",
}
"""Fast views: aggregates by sums and counts (filters, joins with the small ``supplier``,
``nation`` and ``part``, a view read by a view), which the local engine maintains."""
FAST_SETTINGS = {"f_brand": {"full_refresh_ratio": 2.0}}
"""``f_brand`` reads a 3,750-row aggregate view whose ticks change up to half its rows: by
the default ratio (0.35) that is a full refresh on Spark (1-3 s), though the local engine
takes it incrementally in a fraction of a second."""
UPSTREAM = {"part_types": f"{NS}.f_part_types"}
"""Sources that are views: ``f_brand`` reads ``f_part_types``."""
SLOW_VIEWS = {
    "s_priority": "SELECT o.o_orderpriority, l.l_shipmode, p.p_mfgr, COUNT(*) AS line_count, "
                  "SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue, "
                  "MAX(e.n) AS events FROM big_lineitem l "
                  "JOIN big_orders o ON l.l_orderkey = o.o_orderkey "
                  "JOIN part p ON l.l_partkey = p.p_partkey "
                  "CROSS JOIN (SELECT COUNT(*) AS n FROM events) e "
                  "GROUP BY o.o_orderpriority, l.l_shipmode, p.p_mfgr",
    "s_lines": "SELECT l.l_orderkey, l.l_linenumber, l.l_partkey, l.l_extendedprice, "
               "o.o_orderdate, o.o_custkey FROM big_lineitem l "
               "JOIN big_orders o ON l.l_orderkey = o.o_orderkey "
               "CROSS JOIN (SELECT MAX(l_quantity) AS q FROM events) e "
               "WHERE l.l_quantity <= e.q - 40",
}
DRIVER_MEMORY = "4g"
SPARK_CONF = {"spark.driver.memory": DRIVER_MEMORY, "spark.sql.shuffle.partitions": "4",
              "spark.driver.extraJavaOptions": f"-Xms{DRIVER_MEMORY} -XX:+AlwaysPreTouch"}
"""The driver JVM's heap is committed and touched at its start, as a long-running service's:
G1 otherwise grows and shrinks it with the slow views' allocations, and its RSS swings by
hundreds of MiB within a minute (its growth from the first minute to the last was +0.1% in
one run, +10.8% in the next), which says nothing of a leak."""


def workers_supported() -> bool:
    """Whether the config takes the top-level ``workers`` key (parallel refreshes)."""
    from lakehouse.config import Config

    return "workers" in Config.model_fields


def _views(every: str | None) -> list[dict[str, Any]]:
    """The ten views: fast ones on ``every`` (None: their target's cadence), slow ones on
    their target's (every half target less the refresh's duration)."""
    fast = [{"name": f"{NS}.{name}", "sql": sql, "target_lag": FAST_TARGET,
             **({"every": every} if every else {}), **FAST_SETTINGS.get(name, {})}
            for name, sql in FAST_VIEWS.items()]
    slow = [{"name": f"{NS}.{name}", "sql": sql, "target_lag": SLOW_TARGET, "refresh": "full",
             "engine": "spark"}
            for name, sql in SLOW_VIEWS.items()]
    return fast + slow


def _config(root: Path, port: int, every: str | None, workers: int | None) -> Path:
    """Write ``soak.yaml``: the catalog on ``port``, the sources, the ten views."""
    path = root / "soak.yaml"
    sources: dict[str, Any] = {name: {"iceberg": ident} for name, ident in SOURCES.items()}
    sources.update({name: {"view": view} for name, view in UPSTREAM.items()})
    document: dict[str, Any] = {
        "warehouse": str(root / "warehouse"), "catalog": {"listen": f"127.0.0.1:{port}"},
        "spark": {"conf": SPARK_CONF}, "maintenance": MAINTENANCE, "sources": sources,
        "views": _views(every)}
    if workers:
        document["workers"] = workers
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with string views as plain strings (pyiceberg's Arrow types)."""
    schema = pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f
                        for f in table.schema])
    return table.cast(schema)


def _load_sources(catalog: RestCatalog, folder: Path, commits: int) -> pa.Table:
    """Create and fill the sources; return ``lineitem`` rows enough for ``commits`` commits."""
    catalog.create_namespace("src")
    for name, table_name in (("supplier", "supplier"), ("nation", "nation"), ("part", "part"),
                             ("big_orders", "orders")):
        rows = _plain(pq.read_table(folder / f"{table_name}.parquet"))
        catalog.create_table(SOURCES[name], schema=rows.schema).append(rows)
    lineitem = pq.ParquetFile(folder / "lineitem.parquet")
    schema = _plain(lineitem.schema_arrow.empty_table()).schema
    big = catalog.create_table(SOURCES["big_lineitem"], schema=schema)
    groups = list(range(lineitem.num_row_groups))
    for start in range(0, len(groups), 16):  # a few appends, bounded memory
        big.append(_plain(lineitem.read_row_groups(groups[start:start + 16])))
    needed, read = EVENTS_ROWS + 2 * COMMIT_ROWS * commits, 0
    for read, group in enumerate(groups, start=1):  # noqa: B007 - how many are needed
        needed -= lineitem.metadata.row_group(group).num_rows
        if needed <= 0:
            break
    rows = _plain(lineitem.read_row_groups(groups[:read]))
    catalog.create_table(SOURCES["events"], schema=schema).append(rows.slice(0, EVENTS_ROWS))
    return rows.slice(EVENTS_ROWS)


def _alive(process: subprocess.Popen[bytes], log: Path) -> None:
    """Raise with the end of its log if ``process`` exited."""
    if process.poll() is not None:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"lakehouse exited with {process.returncode}:\n{tail}")


def run(duration_s: float = 600.0, warmup_s: float = 60.0, every: str | None = "on_change",
        workers: int | None = WORKERS) -> dict[str, Any]:
    """Soak for ``duration_s`` after every view first committed; the first ``warmup_s`` of
    it is not measured. ``workers`` is written to the config when the key exists (0 or None:
    not written, the scheduler's default)."""
    root = WORK / "soak_run"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    workers = workers if workers and workers_supported() else None
    port, metrics_port = free_port(), free_port()
    config = _config(root, port, every, workers)
    uri = f"http://127.0.0.1:{port}/iceberg"
    try:
        with lakehouse_process("serve", "--config", str(config), log=root / "serve.log") as server:
            _wait(lambda: _ok(uri), "the catalog")
            catalog = RestCatalog("soak", uri=uri)
            started = time.perf_counter()
            rest = _load_sources(catalog, generate_cached(SCALE_FACTOR),
                                  int(duration_s + BUILD_TIMEOUT_S))
            print(f"  sources loaded in {time.perf_counter() - started:.0f} s", flush=True)
            result = _soak(catalog, uri, config, rest, (duration_s, warmup_s, metrics_port),
                           server.pid)
    finally:
        shutil.rmtree(root / "warehouse", ignore_errors=True)
    return {**result, "duration_s": duration_s, "warmup_s": warmup_s,
            "fast_every": every or "target", "workers": workers, "goals": GOALS,
            "maintenance": MAINTENANCE,
            "commit_rows": COMMIT_ROWS, "delete_every": DELETE_EVERY,
            "events_rows": EVENTS_ROWS, "scale_factor": SCALE_FACTOR,
            "spark_conf": SPARK_CONF, "load": load_average()}


def _soak(catalog: RestCatalog, uri: str, config: Path, rest: pa.Table,
          timing: tuple[float, float, int], server_pid: int) -> dict[str, Any]:
    """Start the writer, ``lakehouse run`` and the probes; soak; collect the results."""
    duration_s, warmup_s, metrics_port = timing
    log = SourceLog()
    events = catalog.load_table(SOURCES["events"])
    snapshot = events.current_snapshot()
    assert snapshot is not None
    log.add(snapshot.snapshot_id, time.time())
    views = [v["name"] for v in _views(None)]
    poller = LagPoller(uri, views, UPSTREAM, "events", log,
                       slow=frozenset(f"{NS}.{name}" for name in SLOW_VIEWS))
    writer = Writer(events, Slices(rest, COMMIT_ROWS), log, delete_every=DELETE_EVERY,
                    oldest_reflected=poller.oldest_reflected)
    run_log = config.parent / "run.log"
    writer.start()
    poller.start()
    try:
        with lakehouse_process("run", "--config", str(config), "--metrics-listen",
                      f"127.0.0.1:{metrics_port}", log=run_log) as runner:
            rss = RssSampler(runner.pid, {"catalog": server_pid}, metrics_port)
            rss.start()
            try:
                window = _steady(runner, run_log, poller, duration_s, warmup_s)
                scraped = _scrape(metrics_port) if runner.poll() is None else {}
            finally:
                rss.stop()
            crash = _crash(runner, run_log, window[1])
    finally:
        writer.stop()
        poller.stop()
    result = {**_results(catalog, poller, writer, rss, scraped, window), "crash": crash,
              "table_files": table_files(config.parent / "warehouse")}
    result["verdict"] = verdict(result)
    return result


def table_files(warehouse: Path) -> dict[str, int]:
    """What the view tables keep of their commits at the end, the most over the views: an
    Iceberg table's metadata files (``*.metadata.json``) and a Delta copy's log entries
    (``_delta_log/*.json``). Each refresh writes one of each; maintenance and the catalog
    are to keep them bounded."""
    names = [*FAST_VIEWS, *SLOW_VIEWS]
    iceberg = [len(list((warehouse / NS / name / "metadata").glob("*.metadata.json")))
               for name in names]
    delta = [len(list((warehouse / "delta" / NS / name / "_delta_log").glob("*.json")))
             for name in names]
    return {"iceberg_metadata_files_max": max(iceberg), "delta_log_entries_max": max(delta)}


def _crash(runner: subprocess.Popen[bytes], run_log: Path,
           built: float) -> dict[str, Any] | None:
    """How ``lakehouse run`` ended if it exited during the soak: when, its code, its error."""
    code = runner.poll()
    if code is None:
        return None
    lines = [ln for ln in run_log.read_text(errors="replace").splitlines() if ln.strip()]
    return {"after_s": round(time.time() - built), "returncode": code,
            "error": lines[-1][:300] if lines else ""}


def _scrape(port: int) -> dict[str, dict[str, float]]:
    """The pipeline's metrics per view; empty (with a note) if they cannot be read."""
    try:
        return metrics(port)
    except httpx.HTTPError as error:
        print(f"  metrics not read: {error}", flush=True)
        return {}


def _steady(runner: subprocess.Popen[bytes], run_log: Path, poller: LagPoller,
            duration_s: float, warmup_s: float) -> tuple[float, float, float, float]:
    """Wait for every view's first commit, then soak.

    Returns:
        When ``lakehouse run`` started, when every view was built, when the measurement
        started (after the warm-up) and when it ended (seconds since the epoch): at the
        end of the soak, or when ``lakehouse run`` exited.
    """
    started = time.time()
    deadline = started + BUILD_TIMEOUT_S
    while not poller.built():
        _alive(runner, run_log)
        if time.time() > deadline:
            raise TimeoutError(f"views not built after {BUILD_TIMEOUT_S} s: "
                               f"{[v for v, f in poller.current.items() if not f]}")
        time.sleep(0.5)
    built = time.time()
    print(f"  every view built after {built - started:.0f} s; soaking {duration_s:.0f} s",
          flush=True)
    while time.time() < built + duration_s:
        if runner.poll() is not None:  # a crash is a result: measured up to it
            print(f"  lakehouse run exited with {runner.returncode}", flush=True)
            break
        time.sleep(1)
        elapsed = time.time() - built
        if int(elapsed) % 60 == 0:
            print(f"  {elapsed:.0f} s", flush=True)
    return started, built, built + warmup_s, time.time()


def _results(catalog: RestCatalog, poller: LagPoller, writer: Writer, rss: RssSampler,
             scraped: dict[str, dict[str, float]],
             window: tuple[float, float, float, float]) -> dict[str, Any]:
    """Per view its lag, SLO and refreshes in the measured window; RSS; the writer."""
    started, built, since, until = window
    since = min(since, until)  # exited during the warm-up: nothing measured
    history = _history(catalog, since, until)
    views = {}
    for view in _views(None):
        name, target = view["name"], float(view["target_lag"].removesuffix("s"))
        views[name] = {"kind": "slow" if name.split(".")[1] in SLOW_VIEWS else "fast",
                       "target_s": target,
                       **lag_stats(poller.series[name], since, until, target),
                       **history.get(name, {"refreshes": {}}),
                       "pipeline": scraped.get(name, {}),
                       "lag_per_s": lag_per_second(poller.series[name], built, until)}
    samples = [{**s, "t": round(s["t"] - built, 1)} for s in rss.samples]
    rss_since = rss_since_s(writer.first_expiry_s, since, until)
    memory = {key: growth(samples, key, rss_since - built) for key in RSS_KEYS}
    early = {key: growth(samples, key, since - built) for key in RSS_KEYS}
    result = {"views": views, "rss": samples, "rss_growth": memory,
              "rss_since_s": round(rss_since - built, 1), "rss_growth_from_warmup": early,
              "source_snapshots": thinned(writer.snapshot_counts, built, RSS_EVERY_S),
              "writer": _writer_summary(writer, poller.log.count_between(since, until),
                                        until - since),
              "poll_errors": poller.errors[:5],
              "build_s": round(built - started, 1),
              "measured_s": round(until - since, 1)}
    return result


def rss_since_s(first_expiry_s: float | None, since_s: float, until_s: float) -> float:
    """When the RSS growth is judged from (seconds since the epoch): the end of the warm-up
    (``since_s``), or, when later, the writer's first expiry that removed snapshots (before
    it, the source's metadata, which every refresh reads, only grows; after it, its size
    stays between its bounds); never after ``until_s``.
    """
    return min(max(since_s, first_expiry_s or since_s), until_s)


def thinned(counts: list[tuple[float, int]], built: float,
               step_s: float) -> list[dict[str, float]]:
    """The source's snapshot count at most every ``step_s``: ``t`` seconds since ``built``."""
    out: list[dict[str, float]] = []
    for at, count in counts:
        if not out or at - built >= out[-1]["t"] + step_s:
            out.append({"t": round(at - built, 1), "snapshots": count})
    return out


def _writer_summary(writer: Writer, measured: int, measured_s: float) -> dict[str, Any]:
    """The writer's commits (all, and the rate in the measured window) and their times."""
    commit_s = sorted(writer.commit_s) or [0.0]
    return {"commits": writer.commits, "deletes": writer.deletes,
            "expired_snapshots": writer.expired, "errors": writer.errors[:5],
            "commit_p50_s": round(statistics.median(commit_s), 3),
            "commit_p99_s": round(commit_s[int(0.99 * (len(commit_s) - 1))], 3),
            "commit_max_s": round(commit_s[-1], 3),
            "measured_commits_per_s": round(measured / measured_s, 3) if measured_s > 0
            else None}


def _history(catalog: RestCatalog, since: float, until: float) -> dict[str, dict[str, Any]]:
    """Per view, the refreshes that started in the window: count by mode, durations."""
    rows = catalog.load_table("pipeline.refresh_history").scan().to_arrow().to_pylist()
    with (WORK / "soak_run" / "history.jsonl").open("w") as dump:  # kept for a closer look
        dump.writelines(json.dumps(r, default=str) + "\n" for r in rows)
    out: dict[str, dict[str, Any]] = {}
    for view in {r["view"] for r in rows}:
        mine = [r for r in rows if r["view"] == view
                and since <= r["started_at"].timestamp() <= until]
        durations = sorted(r["duration_s"] for r in mine if r["mode"] != "failed")
        errors = sorted({r["error"] for r in mine if r["error"]})
        out[view] = {"refreshes": _counts(r["mode"] for r in mine),
                     "engines": _counts(r["engine"] or "none" for r in mine
                                        if r["mode"] != "failed"),
                     "errors": errors[:3]}
        if durations:
            out[view].update(refresh_mean_s=round(statistics.fmean(durations), 3),
                             refresh_p50_s=round(statistics.median(durations), 3),
                             refresh_max_s=round(durations[-1], 3),
                             refresh_min_s=round(durations[0], 3))
    return out


def _counts(values: Iterable[str]) -> dict[str, int]:
    """How many times each value occurs."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def verdict(result: dict[str, Any]) -> dict[str, Any]:
    """The goals met or missed, and by how much."""
    views = result["views"].values()
    fast = [v for v in views if v["kind"] == "fast" and v.get("samples")]
    slow = [v for v in views if v["kind"] == "slow"]
    slo = min((v["slo"] for v in fast), default=None)
    p99 = max((v["p99_lag_s"] for v in fast), default=None)
    slow_s = min((v.get("refresh_p50_s", 0.0) for v in slow), default=None)
    rss = {key: g.get("growth_mib") / g["first_mib"] if g.get("first_mib") else None
           for key, g in result["rss_growth"].items() if key != "catalog_mib"}
    return {"fast_min_slo": slo, "slo_met": slo is not None and slo >= GOALS["slo"],
            "fast_max_p99_lag_s": p99,
            "p99_met": p99 is not None and p99 <= GOALS["p99_lag_s"],
            "slow_min_p50_refresh_s": slow_s,
            "slow_met": slow_s is not None and slow_s > GOALS["slow_refresh_s"],
            "rss_growth_share": {k: None if v is None else round(v, 4) for k, v in rss.items()},
            "rss_met": all(v is not None and v <= GOALS["rss_growth"] for v in rss.values()),
            "stayed_up": result.get("crash") is None}
