"""docs/benchmarks.md and its plots, regenerated from docs/benchmarks/results.json alone."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tests.benchmarks.common import RESULTS, ROOT, read_results  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
PLOTS = RESULTS.parent
QUERIES = ("q1", "q3", "q5")
JOIN_VIEWS = ("q3", "q5")
TARGETS = {"aggregate": 20.0, "join": 10.0, "scaling": 1.5, "floor": 3.0, "catalog": 0.5,
           "freshness_s": 5.0}


def _s(value: float | None) -> str:
    return "–" if value is None else (f"{value:.3f}" if value < 1 else f"{value:.2f}")


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _pct(fraction: float) -> str:
    return f"{fraction:.1%}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows] + [""]


def _machine(results: dict[str, Any]) -> list[str]:
    m = results.get("machine", {})
    lines = ["## Machine", "",
             f"{m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
             f"{m.get('os')}, Python {m.get('python')}. Spark `local[2]` (driver 8 GiB for "
             "TPC-H), catalog on SQLite, warehouse on the local disk.", ""]
    rows = []
    for part in ("tpch", "catalog", "freshness"):
        meta = results.get(part, {}).get("_meta")
        if meta:
            rows.append([part, meta["started"], f"{meta['wall_s']:.0f}",
                         " / ".join(map(str, meta["load_before"])),
                         " / ".join(map(str, meta["load_after"]))])
    for sf, entry in results.get("tpch", {}).get("scale_factors", {}).items():
        meta = entry.get("meta")
        if meta:
            rows.append([f"tpch SF {sf} (last run)", meta["started"], meta["wall_s"],
                         " / ".join(map(str, meta["load_before"])),
                         " / ".join(map(str, meta["load_after"]))])
    lines += _table(["part", "started", "wall s", "load 1/5/15 min before",
                     "load after"], rows)
    lines += ["Every measurement also records the 1-minute load average at its end (column "
              "*load*). The machine has 2 cores: a load above 2 means other processes (other "
              "test runs) were competing for them, and times are inflated accordingly.", ""]
    return lines


# -- TPC-H -------------------------------------------------------------------------------


def _batches(sf: str, entry: dict[str, Any]) -> list[str]:
    batches = entry.get("batches")
    if not batches:
        return []
    lines = [f"### SF {sf}: refresh after each batch", "",
             "Wall time (s) of one refresh of each view. *inc*: incremental refresh; *full*: "
             "Spark full refresh of the same SQL into the same sinks (Iceberg + Delta); "
             "*duckdb*: DuckDB recompute of the same SQL over the same Iceberg tables through "
             "the REST catalog (query only, result not written). Ratios are full/inc and "
             "duckdb/inc (above 1: incremental is faster).", ""]
    rows = []
    for b in batches:
        change = b["change"]["rows"]
        for q in QUERIES:
            r = b[q]
            inc, full, duck = r["incremental"]["s"], r["full"]["s"], r["duckdb"]["s"]
            rows.append([_pct(b["fraction"]), b["kind"],
                         f"{change['orders']}+{change['lineitem']}", q, _s(inc), _s(full),
                         _s(duck), _x(full / inc), _x(duck / inc),
                         r["incremental"]["rows_in"], r["incremental"]["load"]])
    lines += _table(["batch", "kind", "orders+lineitem rows", "view", "inc s", "full s",
                     "duckdb s", "full/inc", "duckdb/inc", "change rows read", "load"], rows)
    lines += [f"![SF {sf} batches](benchmarks/tpch_sf{sf.replace('.', '_')}.png)", ""]
    _plot_batches(sf, batches)
    return lines


def _plot_batches(sf: str, batches: list[dict[str, Any]]) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    labels = [f"{_pct(b['fraction'])}\n{b['kind']}" for b in batches]
    width = 0.27
    for ax, q in zip(axes, QUERIES, strict=True):
        for i, (mode, color) in enumerate((("incremental", "tab:green"), ("full", "tab:red"),
                                           ("duckdb", "tab:blue"))):
            ax.bar([x + (i - 1) * width for x in range(len(batches))],
                   [b[q][mode]["s"] for b in batches], width, label=mode, color=color)
        ax.set_xticks(range(len(batches)), labels)
        ax.set_yscale("log")
        ax.set_title(f"TPC-H {q.upper()} view, SF {sf}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("refresh wall time (s, log)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(PLOTS / f"tpch_sf{sf.replace('.', '_')}.png", dpi=90)
    plt.close(fig)


def _fixed(entry: dict[str, Any], kind: str, q: str) -> float | None:
    runs = entry.get("scaling", {}).get(kind) or []
    times = [r["refresh"][q]["s"] for r in runs]
    return statistics.median(times) if times else None


def _scaling(tpch: dict[str, Any]) -> list[str]:
    sfs = tpch.get("scale_factors", {})
    if not sfs:
        return []
    lines = ["## Scaling: a fixed change at growing scale factors", "",
             "A fixed change of 250 orders with their line items (~1,000 lineitem rows), "
             "inserted (median of the repeats) or deleted (copy-on-write DELETE, one run), "
             "refreshed incrementally. Goal: flat. Floor: median of five one-row Spark "
             "`INSERT`s into a small Iceberg table through the same catalog. Compare the "
             "*load* column before reading a ratio between scale factors. SF 3 is not in "
             "this run (time budget); `make bench BENCH_ARGS='--parts tpch --scale-factors 3 "
             "--batch-scale-factors \"\"'` adds it to the results.", ""]
    rows = []
    for sf, entry in sfs.items():
        floor = entry.get("floor", {}).get("s")
        for q in QUERIES:
            ins, dele = _fixed(entry, "insert", q), _fixed(entry, "delete", q)
            loads = [r["refresh"][q]["load"] for r in entry.get("scaling", {}).get("insert", [])]
            rows.append([sf, q, _s(ins), _s(dele), _s(floor),
                         _x(ins / floor if ins and floor else None),
                         _x(dele / floor if dele and floor else None),
                         round(statistics.median(loads), 1) if loads else "–",
                         entry.get("laws", {}).get(q, "–").split(":")[0]])
    lines += _table(["SF", "view", "insert refresh s", "delete refresh s", "floor s",
                     "insert / floor", "delete / floor", "load (inserts)", "law"], rows)
    lines += ["![scaling](benchmarks/scaling.png)", ""]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [float(sf) for sf in sfs]
    for q in QUERIES:
        for kind, style in (("insert", "-o"), ("delete", "--s")):
            ax.plot(xs, [_fixed(e, kind, q) for e in sfs.values()], style, label=f"{q} {kind}")
    ax.plot(xs, [e.get("floor", {}).get("s") for e in sfs.values()], ":k", label="floor")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("TPC-H scale factor")
    ax.set_ylabel("incremental refresh (s)")
    ax.set_title("Fixed ~1,000-row change")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOTS / "scaling.png", dpi=90)
    plt.close(fig)
    return lines


def _tpch(tpch: dict[str, Any]) -> list[str]:
    sfs = tpch.get("scale_factors", {})
    if not sfs:
        return []
    lines = ["## TPC-H refreshes", "",
             "Views: TPC-H Q1 (aggregate over `lineitem`), Q3 and Q5 (joins + aggregate). Q3's "
             "`ORDER BY revenue DESC, o_orderdate LIMIT 10` is dropped for the view (a view has "
             "no order; top-K is not maintained incrementally); Q1's and Q5's final ORDER BY too. "
             "Sources: the eight TPC-H tables from `tpchgen-cli`, loaded into Iceberg v2 "
             "(copy-on-write) with Spark through the REST catalog. A batch of fraction *f*: "
             "**insert** = RF1, *f* × |orders| new orders (copies of existing ones under unused "
             "keys) with their line items, two Spark appends; **delete** = RF2, *f* × |orders| "
             "existing orders with their line items, two Spark `DELETE`s (copy-on-write). "
             "Both views of a query see the same commits.", ""]
    rows = [[sf, e["load"]["load_s"], e["load"]["tables"]["lineitem"]["total-records"],
             e["load"]["tables"]["lineitem"]["total-data-files"],
             " / ".join(_s(e["initial"][f"{q}_full"]["s"]) for q in QUERIES)]
            for sf, e in sfs.items()]
    lines += _table(["SF", "load s", "lineitem rows", "lineitem data files",
                     "initial full refresh s (q1 / q3 / q5)"], rows)
    for sf, entry in sfs.items():
        lines += _batches(sf, entry)
    return lines


def _profiles(tpch: dict[str, Any]) -> list[str]:
    lines = []
    for sf, entry in tpch.get("scale_factors", {}).items():
        for name, prof in (entry.get("profile") or {}).items():
            lines += [f"#### SF {sf}, {name}: {prof['s']:.2f} s (driver-side cProfile; time in "
                      "py4j calls is Spark work on the JVM)", ""]
            lines += _table(["function", "cumulative s", "calls"],
                            [[f"`{r['function']}`", r["cumulative_s"], r["calls"]]
                             for r in prof["top"]])
    return (["## Profiles of incremental refreshes", ""] + lines) if lines else []


# -- catalog, freshness, memory ------------------------------------------------------------


def _share(run: dict[str, Any], trivial: dict[str, Any]) -> float:
    """Rate relative to the trivial endpoint: the median of same-round ratios when recorded."""
    share: float = run.get("share_of_trivial", run["rps"] / trivial["rps"])
    return share


def _catalog(cat: dict[str, Any]) -> list[str]:
    if not cat:
        return []
    lines = ["## Catalog throughput", "",
             "`GET /iceberg/v1/namespaces/bench/tables/events` (a table with 11 snapshots, "
             f"{cat.get('metadata_bytes')} bytes of JSON), plain and with `If-None-Match` "
             "(answered 304), next to a trivial FastAPI endpoint (`GET /ping`) under the same "
             "uvicorn settings in the same run. One server process each (as `lakehouse serve`), "
             "load from `wrk` over loopback on the same 2 cores; at each connection count the "
             "rows are measured one right after the other, so they share the background load, "
             "in several rounds: each row is its median run (all rates in results.json, "
             "`rps_runs`); *of trivial* is the median of the same-round ratios. *server CPU "
             "µs/req* is the server process's CPU time per answered request (median of the "
             "rounds): unlike the rates it barely moves with the machine's load.", ""]
    rows = []
    trivial = {r["connections"]: r for r in cat["trivial"]}
    series = [(cat["load_table"], "loadTable"), (cat["load_table_etag"], "loadTable + ETag 304"),
              (cat.get("load_table_route", []), "loadTable through the route (`?route=1`)"),
              (cat["trivial"], "trivial /ping")]
    for runs, label in series:
        for r in runs:
            share = _share(r, trivial[r["connections"]])
            rows.append([label, r["connections"], f"{r['rps']:.0f}", r["p50_ms"], r["p99_ms"],
                         f"{share:.0%}", r.get("server_cpu_us", ""), r["load"]])
    lines += _table(["endpoint", "connections", "req/s", "p50 ms", "p99 ms",
                     "of trivial", "server CPU µs/req", "load"], rows)
    lines += ["*loadTable* is the product's path: a plain `GET` is answered by the fast path "
              "(`catalog_api/load_table_fastpath.py`) before FastAPI's routing - one indexed SQL "
              "lookup of the table's `metadata_location`, the ETag from it (304 before any "
              "metadata file is read), else the serialized body from an LRU keyed by metadata "
              "location and `snapshots` mode (metadata files are immutable). An unknown query "
              "parameter (`?route=1`) sends the same request through the FastAPI route instead: "
              "the same lookup, ETag and body cache, plus routing and dependency injection "
              "(requests for vended credentials take the route and build their body per "
              "request).",
              "", "![catalog](benchmarks/catalog.png)", "",
              "Commits: writer processes each append one row at a time to the same table with "
              "pyiceberg for 10 s (pyiceberg retries a lost race itself, with back-off).", ""]
    lines += _table(["writers", "commits", "commits/s", "409s retried", "p50 ms per commit",
                     "load"],
                    [[c["writers"], c["commits"], c["commits_per_s"], c["conflicts_retried"],
                      c["p50_ms"], c["load"]] for c in cat["commits"]])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.17
    plotted = [(r, label) for r, label in series if r]
    for i, (runs, label) in enumerate(plotted):
        ax.bar([x + (i - (len(plotted) - 1) / 2) * width for x in range(len(runs))],
               [r["rps"] for r in runs], width, label=label)
    ax.set_xticks(range(len(cat["trivial"])), [str(r["connections"]) for r in cat["trivial"]])
    ax.set_xlabel("concurrent connections")
    ax.set_ylabel("requests/s")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(PLOTS / "catalog.png", dpi=90)
    plt.close(fig)
    return lines


def _freshness(fresh: dict[str, Any]) -> list[str]:
    if not fresh:
        return []
    lines = ["## End-to-end freshness", "",
             f"`lakehouse serve` + `lakehouse run` (separate processes), view TPC-H Q1 over "
             f"`lineitem` SF 0.1 ({fresh['source_rows']} rows), `every: on_change`, Iceberg and "
             f"Delta sinks. {fresh['commits']} one-row pyiceberg commits to the source, each "
             "waited for: time from the commit's return until pyiceberg (polling the REST "
             "catalog every 0.1 s) sees a view snapshot whose frontier includes it.", ""]
    lines += _table(["commits", "p50 s", "p95 s", "max s", "run process RSS MiB",
                     "its JVM RSS MiB", "load 1/5/15 after"],
                    [[fresh["commits"], fresh["p50_s"], fresh["p95_s"], fresh["max_s"],
                      fresh["memory"]["run_process_rss_mib"], fresh["memory"]["jvm_rss_mib"],
                      " / ".join(map(str, fresh["load"]))]])
    lines += ["![freshness](benchmarks/freshness.png)", ""]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(range(1, len(fresh["lags_s"]) + 1), fresh["lags_s"], "o-", ms=3)
    ax.axhline(TARGETS["freshness_s"], color="red", ls=":", label="target p50 5 s")
    ax.set_xlabel("commit")
    ax.set_ylabel("commit -> visible (s)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(PLOTS / "freshness.png", dpi=90)
    plt.close(fig)
    return lines


def _memory(results: dict[str, Any]) -> list[str]:
    rows = []
    for sf, entry in results.get("tpch", {}).get("scale_factors", {}).items():
        for b in entry.get("batches", []):
            for q in QUERIES:
                for mode in ("incremental", "full", "duckdb"):
                    r = b[q][mode]
                    rows.append((sf, f"{_pct(b['fraction'])} {b['kind']}", q, mode, r))
    if not rows:
        return []
    peak: dict[tuple[str, str, str], dict[str, float]] = {}
    for sf, _, q, mode, r in rows:
        cur = peak.setdefault((sf, q, mode), {"driver": 0.0, "jvm_rss": 0.0, "heap": 0.0})
        cur["driver"] = max(cur["driver"], r["driver_rss_mib"])
        cur["jvm_rss"] = max(cur["jvm_rss"], r["children_rss_mib"])
        cur["heap"] = max(cur["heap"], r["jvm_heap_peak_mib"] or 0.0)
    lines = ["## Peak memory", "",
             "Per TPC-H benchmark, the highest peak over all batch sizes: driver (Python) RSS, "
             "the JVM's RSS (a child process of the driver; it holds the RSS it once grew to), "
             "and the JVM heap in use (sum of heap pools' peak, reset after a GC before each "
             "refresh). With an 8 GiB maximum heap the JVM collects lazily, so the heap peak "
             "includes garbage not yet collected: it bounds, and overstates, what a refresh "
             "needs. DuckDB runs inside the driver. Catalog server and `lakehouse run` "
             "figures are in their sections.", ""]
    lines += _table(["SF", "view", "method", "driver RSS MiB", "JVM RSS MiB",
                     "JVM heap peak MiB"],
                    [[sf, q, mode, v["driver"], v["jvm_rss"], v["heap"] or "–"]
                     for (sf, q, mode), v in peak.items()])
    return lines


# -- targets -------------------------------------------------------------------------------


def targets(results: dict[str, Any]) -> list[list[str]]:
    """Each target: what, goal, measured, met/missed and by how much."""
    out = []
    sfs = results.get("tpch", {}).get("scale_factors", {})
    big = max(sfs, key=float) if sfs else None
    if big and sfs[big].get("batches"):
        for b in sfs[big]["batches"]:
            if b["fraction"] != 0.001:
                continue
            for q in QUERIES:
                goal = TARGETS["join" if q in JOIN_VIEWS else "aggregate"]
                ratio = b[q]["full"]["s"] / b[q]["incremental"]["s"]
                out.append([f"SF {big} 0.1% {b['kind']}, {q}: full / incremental", f"≥ {goal:g}×",
                            _x(ratio), _verdict(ratio >= goal, f"{goal / ratio:.1f}× short")])
    if sfs and len(sfs) > 1:
        small = min(sfs, key=float)
        for q in QUERIES:
            for kind in ("insert", "delete"):
                a, b = _fixed(sfs[small], kind, q), _fixed(sfs[big], kind, q)  # type: ignore
                if a and b:
                    ratio = b / a
                    out.append([f"fixed {kind}, {q}: SF {big} / SF {small}", "≤ 1.5×", _x(ratio),
                                _verdict(ratio <= 1.5, f"{ratio / 1.5:.1f}× over")])
    for sf, entry in sfs.items():
        floor = entry.get("floor", {}).get("s")
        for q in QUERIES:
            ins = _fixed(entry, "insert", q)
            if floor and ins:
                ratio = ins / floor
                out.append([f"SF {sf} fixed insert, {q}: refresh / floor", "≤ 3×", _x(ratio),
                            _verdict(ratio <= 3, f"{ratio / 3:.1f}× over")])
    cat = results.get("catalog")
    if cat:
        for r, t in zip(cat["load_table"], cat["trivial"], strict=True):
            share = _share(r, t)
            out.append([f"loadTable / trivial, {r['connections']} connections", "≥ 50%",
                        f"{share:.0%}", _verdict(share >= 0.5, f"{0.5 / share:.1f}× short")])
    fresh = results.get("freshness")
    if fresh:
        p50 = fresh["p50_s"]
        out.append(["freshness p50", "≤ 5 s", f"{p50:.2f} s",
                    _verdict(p50 <= 5, f"{p50 / 5:.1f}× over")])
    return out


def _verdict(met: bool, miss: str) -> str:
    return "**met**" if met else f"**missed** ({miss})"


def write_report(results: dict[str, Any] | None = None) -> Path:
    """Write docs/benchmarks.md (and the PNGs beside results.json); return its path."""
    results = results if results is not None else read_results()
    PLOTS.mkdir(parents=True, exist_ok=True)
    tpch = results.get("tpch", {})
    lines = ["# Benchmarks", "",
             "Generated by `make bench` (`python -m tests.benchmarks`; `--help` for options) "
             "from `docs/benchmarks/results.json`. Do not edit by hand: change "
             "`tests/benchmarks/report.py` and run `python -m tests.benchmarks --report-only`.",
             ""]
    lines += _machine(results)
    lines += ["## Targets", ""]
    lines += _table(["target", "goal", "measured", "verdict"], targets(results))
    lines += ANALYSIS
    lines += _tpch(tpch) + _scaling(tpch) + _catalog(results.get("catalog", {}))
    lines += _freshness(results.get("freshness", {})) + _memory(results) + _profiles(tpch)
    DOC.write_text("\n".join(lines).rstrip() + "\n")
    return DOC


ANALYSIS: list[str] = [
    "## Findings", "",
    "Measured on a shared 2-core machine: other test runs kept the load average between 3 and "
    "14 during these runs, 16-19 during the catalog part (see the *load* columns), so "
    "absolute times are inflated, by up to several times when the load was high. "
    "Incremental, full and DuckDB runs of one batch follow each other within a minute, so "
    "their ratios are less affected than their absolute values.", "",
    "1. **Incremental refresh is slower than Spark's full refresh for all three views, at "
    "every batch size, at SF 0.1 and SF 1** (0.2-0.5x the speed), and DuckDB's recompute "
    "(0.1-0.9 s) is 10-100x faster than either. Insert refreshes take 8-27 s whether the "
    "batch is 0.1% or 10% of the orders.",
    "2. **Main cause: no aggregate is maintained by an invertible law.** `lakehouse explain` "
    "(recorded as *laws* in results.json) shows all three views' GROUP BY as *affected-key "
    "recompute*: the groups whose key occurs in the delta are recomputed from the old and "
    "the new snapshots. Q1 has 4 groups and Q5 5 nations, so any change affects every group "
    "and the refresh recomputes the whole view twice (old and new) - more work than a full "
    "refresh. Q3's groups are orders, few are affected, but recomputing them still joins "
    "`customer`, `orders` and `lineitem` at both snapshots (Spark scans `lineitem` in full "
    "for the affected keys). In the SF 1 profiles the view-delta evaluation (`count` of the "
    "persisted delta) is 10-22 s of 15-26 s for inserts. SUM, COUNT and AVG (as SUM/COUNT) "
    "are invertible: `ivm/compiler.py` `_top_node` always picks `AFFECTED_KEY_RECOMPUTE`; an "
    "invertible-aggregate law (new row = old view row + sum of weight x value over the "
    "delta, joined to the view's own table by key; MIN/MAX and DISTINCT keep the "
    "affected-key law) would make these refreshes proportional to the change.",
    "   The same shows in the scaling curve: under comparable load (the SF 0.1 fixed-change "
    "runs were repeated at load ~5.5; SF 1 ran at ~4) a 250-order insert takes 1.2-1.7x "
    "longer at SF 1 than at SF 0.1. Q1, whose every refresh recomputes all of `lineitem`, "
    "misses the 1.5x target; Q3 and Q5 meet it only because the fixed costs of item 3 still "
    "dominate at these sizes. (A first SF 0.1 run under load ~13.5 gave 12-18 s and a "
    "misleadingly flat curve; the SF 0.1 batch table comes from that run - see its load "
    "column - so its ratios are comparable but its absolute times are inflated.)",
    "3. **Fixed costs on top** (driver cProfile and Spark job counts): one refresh runs 24-49 "
    "Spark jobs (a full refresh 8-17). The Iceberg sink's Spark `MERGE` or `append` of a "
    "handful of view rows takes 1.5-4.5 s; `refresh.py` counts every change feed with one "
    "Spark job each; building the change feed (pyiceberg plan + scratch Parquet) 1-2 s; "
    "14 time-travel `spark.read.option('snapshot-id')` lookups for Q5 0.6-0.8 s; the Delta "
    "sink 0.3-0.7 s.",
    "4. **Deletes on copy-on-write sources are the slowest case (30-50 s at SF 0.1, 62-77 s "
    "at SF 1; 138 s under the profiler, 125 s of it in two Spark `count`s)**. "
    "A scattered RF2 delete rewrites every `lineitem` data file (4 files at SF "
    "0.1: the whole table). The change feed then reads all rewritten files at both "
    "snapshots, writes them to scratch Parquet, and consolidates ~2x the table's rows "
    "grouped by all 16 columns in Spark; the change feed is not persisted, so the "
    "consolidation runs again for the row count and again inside the view delta. Refresh "
    "time grows with the table, not with the change, for deletes.",
    "5. **Catalog `loadTable` now costs the server what a trivial FastAPI endpoint costs**: "
    "330-450 µs of server CPU per request against 320-430 µs for `GET /ping` (same rounds), "
    "and ~2,000 µs before (measured the same way on the previous code: then ~400-500 req/s, a "
    "fifth of the trivial endpoint, and `If-None-Match` did not help because the 304 was "
    "decided after the metadata file was read and parsed). A plain `GET` is now answered "
    "before FastAPI's routing (`catalog_api/load_table_fastpath.py`) from one indexed SQL "
    "lookup of `metadata_location` (304 before any file is read) and an LRU of serialized "
    "bodies keyed by metadata location; requests that take the route (vended credentials, "
    "remote signing, other query parameters) cost ~750 µs, mostly routing over ~50 routes "
    "and dependency injection. The catalog part ran at load 16-19 on 2 cores, so rates swing "
    "up to 2x between rounds (*rps_runs* in results.json) and some rows exceed 100%; the "
    "target is met at every connection count, and the CPU column shows it is not luck.",
    "6. **Commits on one table**: one pyiceberg writer makes ~10 commits/s at load ~5 (~5.5/s "
    "in the latest run, at load 17; each writes a data file, a manifest, a manifest list, "
    "then commits); 4 and 8 writers make fewer in total (about half and a fifth of that) "
    "because most attempts lose the optimistic race and pyiceberg retries them with "
    "back-off. That is the protocol, not the server: the catalog answered every "
    "conflict with a clean 409.",
    "7. **Freshness p50 ~4 s (met at load ~4-5; a first run at load 7-9 gave 5.8 s, "
    "missed)**: up to 1 s waiting for the `on_change` poll (`ON_CHANGE_POLL_S`) plus a "
    "3-5 s incremental refresh of a one-row change (items 2-3). The first commits after "
    "start take 10-20 s (JVM warm-up); p95 is ~6 s. The margin to the 5 s target is thin "
    "and depends on the machine's load.", "",
    "### Proposed fixes (outside this area; for the owners of `lakehouse/`, `sinks/`, "
    "`catalog_api/`)", "",
    "- **`ivm/compiler.py` + `ivm/evaluate.py`** (largest gain): an invertible-aggregate law "
    "for SUM/COUNT/AVG (AVG kept as SUM and COUNT in hidden columns, or recomputed from "
    "them) - the view delta then reads only the change feed and the view's own rows for the "
    "affected keys, never the sources' snapshots. This is the law DESIGN.md names; its "
    "absence alone makes all three TPC-H views slower incrementally than in full.",
    "- **`lakehouse/refresh.py`**: persist (or `localCheckpoint`) each change feed once in "
    "`_inputs`, and skip `changed_rows` counting unless the policy is `auto` (it only feeds "
    "the `full_refresh_ratio` test); take `rows_out` from the Arrow table that is collected "
    "anyway for the Delta sink instead of `persist().count()`. Removes 3-10 Spark jobs and "
    "the repeated consolidation of item 3.",
    "- **`sinks/iceberg.py`**: for small view deltas (the usual case), collect the delta to "
    "Arrow once and commit with pyiceberg in one transaction (`delete` by key filter + "
    "`append`, `snapshot_properties` carrying the frontier) instead of a Spark `MERGE`/"
    "`append`: one snapshot, same atomicity, ~0.1-0.3 s instead of 2-4.5 s. Keep Spark for "
    "large deltas.",
    "- **`lakehouse/sources/iceberg.py`** (copy-on-write change feeds): compare the old and "
    "new rewritten files on a 64-bit hash of each row first and fetch full rows only for "
    "hashes whose count changed. Measured here with DuckDB on `lineitem` (both-way "
    "multiset difference, 0.1% of orders deleted): 1.1 s at SF 0.1 and 11 s at SF 1 for the "
    "hash diff, against 4.5 s and 55 s for `EXCEPT ALL` on full rows (load ~9). It stays "
    "proportional to the rewritten files: the lasting fix is the source layout. Document "
    "that sources should use merge-on-read deletes (the change is then the deleted "
    "positions only; the reader already supports them) or small files clustered by key.",
    "- **`lakehouse/scheduler.py`**: an `on_change` poll of 1 s is a fifth of the 5 s "
    "freshness budget; 0.2 s costs one `loadTable` per source per poll, which the catalog's "
    "fast path (item 5) makes cheap.", "",
]
"""Hand-written findings, kept next to the generator so the doc stays one regenerated file."""
