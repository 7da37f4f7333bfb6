"""docs/benchmarks.md and its plots, regenerated from docs/benchmarks/results.json alone."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lakehouse.config import DEFAULT_FULL_REFRESH_RATIO  # noqa: E402
from tests.benchmarks import common  # noqa: E402
from tests.benchmarks.common import read_results  # noqa: E402
from tests.benchmarks.crossings import KINDS, crossovers, points  # noqa: E402
from tests.benchmarks.findings import findings, ran_on, spark_jobs  # noqa: E402
from tests.benchmarks.profile import CATEGORIES, categorize  # noqa: E402
from tests.benchmarks.soak_probes import growth, lag_windows  # noqa: E402
from tests.benchmarks.targets import (  # noqa: E402
    FLOOR_ENGINES,
    QUERIES,
    TARGETS,
    all_engines,
    cli_medians,
    compared,
    engines_of,
    fixed,
    fixed_runs,
    floor_s,
    normalize,
    share,
    targets,
)

PLOTS = common.RESULTS.parent
"""Where the plots go: beside the results file (set by :func:`write_report`)."""
ENGINE_COLORS = {"auto": "tab:green", "spark": "tab:orange", "local": "tab:olive"}


def _s(value: float | None) -> str:
    return "–" if value is None else (f"{value:.3f}" if value < 1 else f"{value:.2f}")


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _check(check: dict[str, Any] | None, side: str) -> str:
    """``✓``, ``✗ n`` (rows without an equal partner), or a dash when not checked."""
    if not check or side not in check:
        return "–"
    mismatched = check[side]["mismatched"]
    return "✓" if mismatched == 0 else f"✗ {mismatched}"


def _pct(fraction: float) -> str:
    return f"{fraction:.1%}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows] + [""]


def _ran_on(samples: list[dict[str, Any]]) -> str:
    """``local``, ``spark``, ``2 local, 1 spark``, or a dash when not recorded."""
    counts = {e: n for e, n in ran_on(samples).items() if e != "?"}
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{n} {e}" for e, n in sorted(counts.items())) or "–"


def _sessions(tpch: dict[str, Any]) -> str:
    """``Spark `local[2]` (driver 8g for TPC-H)``, from the scale factors' sessions."""
    metas = [e.get("meta") or {} for e in tpch.get("scale_factors", {}).values()]
    seen = dict.fromkeys(f"`{m.get('master', 'local[2]')}` (driver "
                         f"{m.get('driver_memory', '8g')})" for m in metas)
    return "Spark " + ", ".join(seen) + " for TPC-H" if seen else "Spark `local[2]`"


def _tpch_sessions(tpch: dict[str, Any]) -> list[str]:
    """One row per scale factor: master, driver memory, engines, the driver's peak RSS."""
    rows = []
    for sf, entry in tpch.get("scale_factors", {}).items():
        meta = entry.get("meta") or {}
        peak = meta.get("driver_peak") or {}
        children = ", ".join(f"{n} {v:,.0f}" for n, v in
                             (meta.get("children_peak_mib") or {}).items()) or "–"
        rows.append([sf, f"`{meta.get('master', '–')}`", meta.get("driver_memory", "–"),
                     "–" if meta.get("executors") is None else meta["executors"],
                     ", ".join(engines_of(entry)), peak.get("driver_rss_mib", "–"),
                     peak.get("jvm_rss_mib", peak.get("children_rss_mib", "–")), children,
                     peak.get("driver_total_rss_mib", "–")])
    if not rows:
        return []
    return ["TPC-H sessions, per scale factor (last run): the Spark master, the driver's "
            "memory (`spark.driver.memory`), the executors (0: local mode, the driver's JVM "
            "runs the tasks), the engines timed, and the driver's peak RSS over the scale "
            "factor's whole run (load, refreshes, DuckDB's recomputes): Python, its JVM (a "
            "child process; in local mode with the executors), each child process by name "
            "(a forked copy of the JVM about to run a command, such as Hadoop's `chmod`, "
            "shows under its thread's name, `Thread-N`, with the JVM's pages: not more "
            "memory), and Python with its JVM (peak of the sum).", ""] + _table(
        ["SF", "master", "driver memory", "executors", "engines", "Python RSS MiB",
         "JVM RSS MiB", "child processes (peak RSS MiB)", "driver RSS MiB (Python + JVM)"],
        rows)


def _machine(results: dict[str, Any]) -> list[str]:
    m = results.get("machine", {})
    lines = ["## Machine", "",
             f"{m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
             f"{m.get('os')}, Python {m.get('python')}. {_sessions(results.get('tpch', {}))}, "
             "catalog on SQLite, warehouse on the local disk.", ""]
    rows = []
    for part in ("tpch", "catalog", "freshness", "cli", "crossover", "soak"):
        meta = results.get(part, {}).get("_meta")
        if meta:
            rows.append([part, meta["started"], f"{meta['wall_s']:.0f}",
                         meta.get("machine", {}).get("cpu", "–"),
                         " / ".join(map(str, meta["load_before"])),
                         " / ".join(map(str, meta["load_after"]))])
    for sf, entry in results.get("tpch", {}).get("scale_factors", {}).items():
        meta = entry.get("meta")
        if meta:
            rows.append([f"tpch SF {sf} (last run)", meta["started"], meta["wall_s"],
                         meta.get("machine", {}).get("cpu", "–"),
                         " / ".join(map(str, meta["load_before"])),
                         " / ".join(map(str, meta["load_after"]))])
    lines += _table(["part", "started", "wall s", "cpu", "load 1/5/15 min before",
                     "load after"], rows)
    lines += ["Parts run in different sessions may have run on different machines of the "
              "same size (*cpu*): compare times across parts with that in mind. "
              "Every measurement also records the 1-minute load average at its end (column "
              "*load*). The machine has 2 cores, and the load counts the benchmark's own "
              "threads: a part running alone shows 2-3; more means other processes (other test "
              "runs) were competing for the cores, and times are inflated accordingly.", ""]
    return lines + _tpch_sessions(results.get("tpch", {}))


# -- TPC-H -------------------------------------------------------------------------------


def _batches(sf: str, entry: dict[str, Any]) -> list[str]:
    batches = entry.get("batches")
    if not batches:
        return []
    lines = [f"### SF {sf}: refresh after each batch", "",
             "Wall time (s) of one refresh of each view. *engine*: the incremental view's "
             "`engine` setting (one view per engine, all refreshed after the same commits; "
             "*ran on*: where its refreshes ran, `RefreshResult.engine`: `local` is DuckDB in "
             "the driver's process, no Spark job); *inc*: its incremental refresh; *full*: "
             "Spark full refresh of the same SQL into the same sinks (Iceberg + Delta), the "
             "same for every engine's row; "
             "*duckdb*: DuckDB recompute of the same SQL over the same Iceberg tables through "
             "the REST catalog (query only, result not written). Ratios are full/inc and "
             "duckdb/inc (above 1: incremental is faster). *= full*, *= duckdb*: after the "
             "refreshes (untimed), the incremental view's rows equal the full view's and "
             "DuckDB's (✓), or how many rows on either side have no equal partner (✗). *n*: "
             "batches of that size and kind; each time is the median over them (every sample "
             "in results.json, `runs_s`), and the check covers them all.", ""]
    rows = []
    for b in batches:
        change = b["change"]["rows"]
        for q in QUERIES:
            r = b[q]
            full, duck = r["full"]["s"], r["duckdb"]["s"]
            for engine, sample in r["incremental"].items():
                inc, check = sample["s"], (r.get("check") or {}).get(engine)
                rows.append([_pct(b["fraction"]), b["kind"], b.get("repeats", 1),
                             f"{change['orders']}+{change['lineitem']}", q, engine,
                             _ran_on([sample]), _s(inc), _s(full), _s(duck), _x(full / inc),
                             _x(duck / inc), sample["spark_jobs"], _check(check, "full"),
                             _check(check, "duckdb"), sample["load"]])
    lines += _table(["batch", "kind", "n", "orders+lineitem rows per batch", "view", "engine",
                     "ran on", "inc s", "full s", "duckdb s", "full/inc", "duckdb/inc",
                     "inc Spark jobs", "= full", "= duckdb", "load"], rows)
    lines += [f"![SF {sf} batches](benchmarks/tpch_sf{sf.replace('.', '_')}.png)", ""]
    _plot_batches(sf, batches, engines_of(entry))
    return lines


def _plot_batches(sf: str, batches: list[dict[str, Any]], engines: list[str]) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    labels = [f"{_pct(b['fraction'])}\n{b['kind']}" for b in batches]
    series = [(f"incremental, {e}", ENGINE_COLORS.get(e, "tab:gray"),
               lambda b, q, e=e: b[q]["incremental"].get(e, {}).get("s", 0.0)) for e in engines]
    series += [(mode, color, lambda b, q, mode=mode: b[q][mode]["s"])
               for mode, color in (("full", "tab:red"), ("duckdb", "tab:blue"))]
    width = 0.8 / len(series)
    for ax, q in zip(axes, QUERIES, strict=True):
        for i, (label, color, seconds) in enumerate(series):
            ax.bar([x + (i - (len(series) - 1) / 2) * width for x in range(len(batches))],
                   [seconds(b, q) for b in batches], width, label=label, color=color)
        ax.set_xticks(range(len(batches)), labels)
        ax.set_yscale("log")
        ax.set_title(f"TPC-H {q.upper()} view, SF {sf}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("refresh wall time (s, log)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(PLOTS / f"tpch_sf{sf.replace('.', '_')}.png", dpi=90)
    plt.close(fig)


def _beyond(sfs: dict[str, Any]) -> str:
    """What the scaling table says of the scale factors past the batches' largest."""
    big = compared(sfs)[1]
    extra = [sf for sf in sorted(sfs, key=float) if float(sf) > float(big)]
    if extra:
        return (f"SF {', '.join(extra)} ran the fixed changes only (no batches), in the same "
                "run as the others.")
    return ("SF 3 is not in this run; `make bench BENCH_ARGS='--parts tpch'` (its default "
            "scale factors, 0.1, 1 and 3) adds it.")


def _scaling(tpch: dict[str, Any]) -> list[str]:
    sfs = tpch.get("scale_factors", {})
    if not sfs:
        return []
    floor_engines = ", ".join(f"`engine: {e}`" for e in FLOOR_ENGINES)
    lines = ["## Scaling: a fixed change at growing scale factors", "",
             "A fixed change of 250 orders with their line items (~1,000 lineitem rows), "
             "inserted or deleted (merge-on-read `DELETE`), refreshed incrementally by each "
             "engine's view (*engine*; *ran on*: where those refreshes ran); each time "
             "is the median over the repeats of that kind (every sample in results.json). "
             "Goal: flat. *first delete*: the first delete after the refresher "
             "started, which decodes the data files' columns it then keeps "
             "(`column_cache_bytes`); *delete*: the next ones, as a running refresher sees "
             "deletes. *CoW delete*: one more such delete with the "
             "tables' `write.delete.mode` set to copy-on-write for it, for contrast (smaller "
             "scale factors only). *floor*: median of five one-row pyiceberg appends "
             "(`table.append`) to a small Iceberg table through the same catalog, the commit "
             f"a tick cannot beat (target: a tick of {floor_engines} at the smallest scale "
             f"factor ≤ {TARGETS['floor']:g}× it); *Spark INSERT floor*: the former floor, "
             "median of five one-row Spark `INSERT`s into such a table (no longer a target). "
             "Compare the *load* column before reading "
             "a ratio between scale factors. *law*: how `lakehouse explain` says the view's "
             "top node is maintained. " + _beyond(sfs), ""]
    rows = []
    for sf, entry in sfs.items():
        floor = floor_s(entry)
        insert_floor = (entry.get("floor_spark_insert") or {}).get("s")
        for q in QUERIES:
            for engine in engines_of(entry):
                ins, dele = fixed(entry, "insert", q, engine), fixed(entry, "delete", q, engine)
                runs = [r for kind in ("insert", "delete_first", "delete", "delete_cow")
                        for r in fixed_runs(entry, kind, q, engine)]
                loads = [r["load"] for r in fixed_runs(entry, "insert", q, engine)]
                rows.append([sf, q, engine, _ran_on(runs), _s(ins),
                             _s(fixed(entry, "delete_first", q, engine)), _s(dele),
                             _s(fixed(entry, "delete_cow", q, engine)), _s(floor),
                             _x(ins / floor if ins and floor else None),
                             _x(dele / floor if dele and floor else None), _s(insert_floor),
                             round(statistics.median(loads), 1) if loads else "–",
                             entry.get("laws", {}).get(q, "–").split(":")[0]])
    lines += _table(["SF", "view", "engine", "ran on", "insert refresh s", "first delete s",
                     "delete refresh s", "CoW delete s", "floor s", "insert / floor",
                     "delete / floor", "Spark INSERT floor s", "load (inserts)", "law"], rows)
    lines += ["![scaling](benchmarks/scaling.png)", ""]
    engines = all_engines(sfs)
    fig, axes = plt.subplots(1, len(engines), figsize=(7 * len(engines), 4.5), sharey=True,
                             squeeze=False)
    xs = [float(sf) for sf in sfs]
    for ax, engine in zip(axes[0], engines, strict=True):
        for q in QUERIES:
            for kind, style in (("insert", "-o"), ("delete", "--s"), ("delete_cow", ":^")):
                ax.plot(xs, [fixed(e, kind, q, engine) for e in sfs.values()], style,
                        label=f"{q} {kind}")
        ax.plot(xs, [floor_s(e) for e in sfs.values()], ":k", label="floor (pyiceberg append)")
        ax.plot(xs, [(e.get("floor_spark_insert") or {}).get("s") for e in sfs.values()],
                ":", color="grey", label="Spark INSERT")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("TPC-H scale factor")
        ax.set_title(f"Fixed ~1,000-row change, engine: {engine}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("incremental refresh (s)")
    fig.tight_layout()
    fig.savefig(PLOTS / "scaling.png", dpi=90)
    plt.close(fig)
    return lines


def _large_batches(sfs: dict[str, Any]) -> str:
    """Which scale factors skipped the largest batches (``--large-fraction-below``), if any."""
    batched = {sf: {b["fraction"] for b in e["batches"]} for sf, e in sfs.items()
               if e.get("batches")}
    largest = max((f for fractions in batched.values() for f in fractions), default=None)
    skipped = [sf for sf, fractions in batched.items() if largest not in fractions]
    if largest is None or not skipped:
        return ""
    return (f" Batches of {_pct(largest)} did not run at SF {', '.join(skipped)} "
            "(`--large-fraction-below`).")


def _tpch(tpch: dict[str, Any]) -> list[str]:
    sfs = tpch.get("scale_factors", {})
    if not sfs:
        return []
    lines = ["## TPC-H refreshes", "",
             "Views: TPC-H Q1 (aggregate over `lineitem`), Q3 and Q5 (joins + aggregate). Q3's "
             "`ORDER BY revenue DESC, o_orderdate LIMIT 10` is dropped for the view (a view has "
             "no order; top-K is not maintained incrementally); Q1's and Q5's final ORDER BY too. "
             "Sources: the eight TPC-H tables from `tpchgen-cli`, loaded into Iceberg v2 "
             "with Spark through the REST catalog; `orders` and `lineitem`, the tables the "
             "batches change, are **merge-on-read** (`write.delete.mode`, `write.update.mode`, "
             "`write.merge.mode`), as docs/change-feeds.md recommends for sources. A batch of "
             "fraction *f*: **insert** = RF1, *f* × |orders| new orders (copies of existing ones "
             "under unused keys) with their line items, two Spark appends; **delete** = RF2, "
             "*f* × |orders| existing orders with their line items, two Spark `DELETE`s "
             "(position delete files). Both views of a query see the same commits."
             + _large_batches(sfs), ""]
    rows = [[sf, e["load"]["load_s"], e["load"]["tables"]["lineitem"]["total-records"],
             e["load"]["tables"]["lineitem"]["total-data-files"],
             " / ".join(_s(e["initial"][f"{q}_full"]["s"]) for q in QUERIES)]
            for sf, e in sfs.items()]
    lines += _table(["SF", "load s", "lineitem rows", "lineitem data files",
                     "initial full refresh s (q1 / q3 / q5)"], rows)
    for sf, entry in sfs.items():
        lines += _batches(sf, entry)
    return lines


def _split_table(tpch: dict[str, Any]) -> list[str]:
    """One row per profiled refresh: seconds per :data:`CATEGORIES` label."""
    profiles = [(sf, name, prof) for sf, entry in tpch.get("scale_factors", {}).items()
                for name, prof in (entry.get("profile") or {}).items() if "breakdown" in prof]
    if not profiles:
        return []
    splits = [categorize(prof["breakdown"], prof["s"]) for _, _, prof in profiles]
    labels = [label for label in [c for c, _ in CATEGORIES] + ["other"]
              if any(split[label] > 0 for split in splits)]
    rows = [[sf, name.replace("_", " "), _s(prof["s"]), prof["spark_jobs"]]
            + [_s(split[label]) for label in labels] + [prof["load"]]
            for (sf, name, prof), split in zip(profiles, splits, strict=True)]
    return ["Seconds of each profiled refresh (a fixed 250-order change, incremental) by "
            "where the refresh's own code (`lakehouse/runtime.py`, `lakehouse/refresh.py`) "
            "spends them: change feeds and snapshot lookups (`lakehouse/sources/`), building "
            "the view delta (`ivm/`), Spark actions it triggers itself (`count`, `persist`), "
            "collecting to Arrow (`lakehouse/spark/`), the sinks; *other*: the rest (pyiceberg "
            "and py4j calls made directly, the refresh's own code). In refreshes measured "
            "since the two sinks commit at once (`lakehouse/sink_commits.py`, 2026-11-29), "
            "the Iceberg commit runs on a helper thread, which the profile does not see: when "
            "both sinks commit, its time shows only beyond the Delta commit's (*Iceberg sink, "
            "beyond Delta's*, a column shown when not zero).", ""] + _table(
        ["SF", "refresh", "total s", "Spark jobs"] + labels + ["load"], rows)


def _profiles(tpch: dict[str, Any]) -> list[str]:
    lines = []
    for sf, entry in tpch.get("scale_factors", {}).items():
        for name, prof in (entry.get("profile") or {}).items():
            where = f", ran on {prof['ran_on']}" if prof.get("ran_on") else ""
            lines += [f"#### SF {sf}, {name}: {prof['s']:.2f} s, {spark_jobs(prof['spark_jobs'])} "
                      f"(`engine: {prof.get('engine', 'auto')}`{where}; driver-side cProfile; "
                      "time in py4j calls is Spark work on the JVM)", ""]
            if "breakdown" in prof:
                lines += _table(["called by the refresh", "s", "calls"],
                                [[f"`{r['function']}`", r["s"], r["calls"]]
                                 for r in prof["breakdown"][:10]])
            else:
                lines += _table(["function", "cumulative s", "calls"],
                                [[f"`{r['function']}`", r["cumulative_s"], r["calls"]]
                                 for r in prof["top"]])
    return (["## Profiles of incremental refreshes", ""] + _split_table(tpch) + lines
            ) if lines else []


# -- crossover -----------------------------------------------------------------------------


def _crossover(part: dict[str, Any]) -> list[str]:
    batches = part.get("batches")
    if not batches:
        return []
    sf, queries = part["scale_factor"], part["queries"]
    lines = ["## Crossover: when a full refresh is cheaper", "",
             f"Under `refresh: auto` a view is recomputed in full when its change feeds' rows "
             f"exceed `full_refresh_ratio` (default {DEFAULT_FULL_REFRESH_RATIO:g}) times its "
             f"sources' rows. Here, at TPC-H SF {sf:g}, batches of growing size (fractions "
             "of the orders, with their line items) are inserted (RF1) and deleted (RF2, "
             "merge-on-read) as in *TPC-H refreshes*, and after each one every view's "
             "incremental refresh and its Spark full refresh (same SQL, same sinks) are timed "
             "side by side. *share* is the change as `auto` weighs it: the change feeds' rows "
             "(*change rows*, `RefreshResult.rows_in`) over the rows of the view's sources at "
             "the new version (*input rows*, from table metadata). A fraction's delete follows "
             "its insert, whose new orders stay: an insert of *f* is a share of about "
             "*f*/(1+*f*), the delete of *f* one of about *f*. After each fraction's insert "
             "and delete, `orders` and `lineitem` are "
             "overwritten with the generated data again and the incremental views catch up "
             "(untimed): every fraction starts from the loaded tables, since deletes would "
             "otherwise exhaust the orders, and leftover position deletes and appended files "
             "would make later full refreshes slower than the first.", ""]
    rows = []
    for b in batches:
        change = b["change"]["rows"]
        for q in queries:
            r = b[q]
            inc, full = r["incremental"], r["full"]
            rows.append([_pct(b["fraction"]), b["kind"], f"{change['orders']}+{change['lineitem']}",
                         q, r["change_rows"], r["input_rows"], _pct(r["share"]), _s(inc["s"]),
                         _s(full["s"]), _x(full["s"] / inc["s"]), _s(inc["cpu_s"]),
                         _s(full["cpu_s"]), _x(full["cpu_s"] / inc["cpu_s"]),
                         inc["spark_jobs"], _check(r.get("check"), "full"), inc["load"]])
    lines += _table(["batch", "kind", "orders+lineitem rows", "view", "change rows",
                     "input rows", "share", "inc s", "full s", "full/inc", "inc CPU s",
                     "full CPU s", "CPU full/inc", "inc Spark jobs", "= full", "load"], rows)
    wall, cpu = crossovers(part), crossovers(part, "cpu_s")
    lines += ["*CPU s*: CPU time of the driver process and the JVM (its child) during the "
              "refresh; unlike wall time it barely grows when other processes compete for the "
              "cores, but it counts both cores' work where the refresh used both. The "
              "crossover is interpolated linearly (in incremental − full) between the largest "
              "share at which the incremental refresh was faster and the next one; *above*: "
              "incremental was faster at every share measured; *below*: full was faster at "
              "every share measured.", ""]
    lines += _table(["view"] + [f"{k} crossover, {m}" for m in ("wall time", "CPU time")
                                for k in KINDS],
                    [[q] + [f[(q, k)].text() if (q, k) in f else "–" for f in (wall, cpu)
                            for k in KINDS] for q in queries])
    lines += ["![crossover](benchmarks/crossover.png)", ""]
    _plot_crossover(part)
    return lines


def _plot_crossover(part: dict[str, Any]) -> None:
    """Wall time (top row) and CPU time (bottom row) by change share, one column per view."""
    queries = part["queries"]
    fig, axes = plt.subplots(2, len(queries), figsize=(5 * len(queries), 8), sharex=True)
    for row, (metric, label) in enumerate((("s", "wall time (s)"), ("cpu_s", "CPU time (s)"))):
        found = crossovers(part, metric)
        for ax, q in zip(axes[row], queries, strict=True):
            for kind, style in (("insert", "-o"), ("delete", "--s")):
                measured = points(part["batches"], q, kind, metric)
                shares = [100 * p[0] for p in measured]
                ax.plot(shares, [p[1] for p in measured], style, color="tab:green",
                        label=f"incremental, {kind}")
                ax.plot(shares, [p[2] for p in measured], style, color="tab:red",
                        label=f"full, {kind}")
                c = found.get((q, kind))
                if c is not None and c.bound == "at":
                    ax.axvline(100 * c.share, color="grey", ls=style[:-1], lw=0.8)
            ax.axvline(100 * DEFAULT_FULL_REFRESH_RATIO, color="black", ls=":",
                       label="default full_refresh_ratio")
            ax.set_title(f"TPC-H {q.upper()} view, SF {part['scale_factor']:g}")
            ax.grid(alpha=0.3)
            if row == 1:
                ax.set_xlabel("change share (% of the sources' rows)")
        axes[row][0].set_ylabel(f"refresh {label}")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(PLOTS / "crossover.png", dpi=90)
    plt.close(fig)


# -- catalog, freshness, memory ------------------------------------------------------------


def _auth_cost(cat: dict[str, Any]) -> list[str]:
    """Issue 17's target: token validation must not halve loadTable's rate."""
    secure = {r["connections"]: r for r in cat.get("load_table_auth", [])}
    if not secure:
        return []
    parts = []
    for plain in cat["load_table"]:
        auth = secure.get(plain["connections"])
        if auth:
            parts.append(f"{auth['rps'] / plain['rps']:.0%} at {plain['connections']} "
                         f"connection{'s' if plain['connections'] > 1 else ''} "
                         f"({auth.get('server_cpu_us')} vs {plain.get('server_cpu_us')} "
                         "server CPU µs/req)")
    return ["*loadTable with auth* is a second catalog process with authentication on "
            "(`catalog.auth`), asked for the same table with an admin's bearer token: the "
            "middleware checks the token (a JWT verified once, then found in a cache until "
            "it expires) and the caller's role before the fast path answers. Its rate is "
            + "; ".join(parts) + " of the open catalog's (target: not halved).", ""]


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
              (cat.get("load_table_auth", []), "loadTable with auth (bearer token)"),
              (cat["trivial"], "trivial /ping")]
    for runs, label in series:
        for r in runs:
            ratio = share(r, trivial[r["connections"]])
            rows.append([label, r["connections"], f"{r['rps']:.0f}", r["p50_ms"], r["p99_ms"],
                         f"{ratio:.0%}", r.get("server_cpu_us", ""), r["load"]])
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
              "request).", "", *_auth_cost(cat),
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
             "catalog every 0.1 s) sees a view snapshot whose frontier includes it. The "
             "scheduler polls `on_change` views every "
             f"{fresh.get('on_change_poll_s', '?')} s.", ""]
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


def _cli(cli: dict[str, Any]) -> list[str]:
    """``lakehouse refresh VIEW`` from a fresh process: medians per way of reaching the catalog."""
    if not cli:
        return []
    lines = ["## A CLI refresh from a fresh process", "",
             f"The demo (`lakehouse demo --days {cli['demo_days']}`), then {cli['repeats']} "
             f"times a change of {cli['change_rows']} flights (a pyiceberg append to the "
             "Iceberg source `flights`), each view refreshed by a new `lakehouse refresh VIEW "
             "--json` process: *wall*, from its start to its exit (Python's start and imports "
             "included); *tick*, the refresh inside it (the summary's `duration_s`). "
             "*served*: `lakehouse serve` runs, the command is its client; *embedded*: "
             "nothing serves the demo's embedded catalog, so the command runs it in its own "
             "process, with no service (`catalog_api/in_process.py`). Floor: a one-row "
             f"pyiceberg append through the catalog, median "
             f"{cli['floor_s']:.3f} s. Goals: a local-engine refresh's wall time ≤ "
             f"{cli['goals']['wall_s']:g} s, its tick ≤ {cli['goals']['floor_ratio']:g}× the "
             "floor.", ""]
    medians = cli_medians(cli)
    rows = [[mode, r["view"], r["mode"], r["engine"], _s(r["wall_s"]), _s(r["wall_max_s"]),
             _s(r["tick_s"]), _x(r["tick_s"] / cli["floor_s"])] for mode, r in medians]
    table = _table(["catalog", "view", "refresh", "engine", "median wall s", "max wall s",
                    "median tick s", "tick / floor"], rows)
    return lines + table + _cli_breakdown(cli, medians)


def _cli_breakdown(cli: dict[str, Any], medians: list[tuple[str, dict[str, Any]]]
                   ) -> list[str]:
    """Where a fresh process's wall time goes: imports, the tick, the rest (by catalog mode)."""
    if "imports_s" not in cli:
        return []
    parts = []
    for mode in dict.fromkeys(m for m, _ in medians):
        mine = [r for m, r in medians if m == mode]
        wall = statistics.median(r["wall_s"] for r in mine)
        tick = statistics.median(r["tick_s"] for r in mine)
        parts.append(f"*{mode}*: median wall {wall:.2f} s = imports {cli['imports_s']:.2f} s + "
                     f"tick {tick:.2f} s + the rest {wall - cli['imports_s'] - tick:.2f} s")
    return ["", "Where the wall time goes: a new process that only imports the CLI's modules "
            f"takes {cli['imports_s']:.2f} s (median of 3). " + "; ".join(parts) + ". The "
            "rest is the config, the catalog client, the plan's compile, the refresh's catalog "
            "requests outside its tick and the process's exit; *embedded* also opens the "
            "catalog's store in its process (its imports included).", ""]


def _soak(soak: dict[str, Any]) -> list[str]:
    """Issue 19: ten views for ten minutes, a source committing every second."""
    if not soak:
        return []
    writer, goals = soak["writer"], soak["goals"]
    lines = ["## Soak", "",
             f"`lakehouse serve` + `lakehouse run` (`workers: {soak['workers'] or 'default'}`, "
             f"view-table maintenance every {soak.get('maintenance', {}).get('every', '1h')}) "
             f"for {soak['duration_s']:.0f} s once every view was built ({soak['build_s']:.0f} s), "
             f"the first {soak['warmup_s']:.0f} s not measured. A writer appends about "
             f"{soak['commit_rows']} `lineitem` rows (whole orders) to the `events` source "
             f"every second (every {soak['delete_every']}th commit deletes an earlier commit's "
             "orders instead; snapshots older than 3 minutes that no view reflects are "
             f"expired every minute): {writer['commits']} commits, "
             f"{writer['measured_commits_per_s']} per second measured, p50 "
             f"{writer['commit_p50_s']} s, max {writer['commit_max_s']} s each. "
             f"Fast views (`target_lag: 5s`, `every: {soak['fast_every']}`) read `events` "
             f"({soak['events_rows']:,} rows at the start), with TPC-H SF {soak['scale_factor']:g} "
             "dimensions, all aggregates by sums and counts, which the local engine "
             "maintains; `f_brand` reads the view `f_part_types`. Slow views (`refresh: "
             "full`, `engine: spark`, `target_lag: 60s`) recompute joins of SF 1 `lineitem` and "
             "`orders` (one with `part` too, the other writing 1.2 million rows; both read "
             "`events`). *lag*: sampled every 0.15 s through the REST "
             "catalog (a slow view's table read every second): now less when the oldest "
             "`events` snapshot the view's current snapshot does not reflect became visible "
             "(0 when it reflects the newest); *SLO*: share of the measured time with lag ≤ "
             "target; *pipeline SLO*: "
             "`lakehouse_view_slo_compliance` at the end (the pipeline's own measure, since "
             "the view's first refresh, warm-up included); refreshes and their seconds from the "
             "refresh history, in the measured window.", ""]
    lines += _table(["view", "kind", "ran on", "target s", "p50 lag s", "p99 lag s",
                     "max lag s", "SLO", "pipeline SLO", "refreshes", "mean refresh s",
                     "max refresh s"],
                    [_soak_row(name, v) for name, v in soak["views"].items()])
    lines += _soak_verdict(soak["verdict"], goals, soak.get("crash")) + _soak_windows(soak)
    lines += _soak_files(soak)
    lines += _soak_rss(soak)
    lines += ["![soak lag](benchmarks/soak_lag.png)", "", "![soak RSS](benchmarks/soak_rss.png)",
              ""]
    _plot_soak(soak)
    return lines


def _soak_files(soak: dict[str, Any]) -> list[str]:
    """What the view tables kept of their commits (one each a refresh) at the end."""
    files = soak.get("table_files")
    if not files:
        return []
    refreshes = max(sum(v.get("refreshes", {}).values()) for v in soak["views"].values())
    return [f"Kept at the end, the most of any view (up to {refreshes} refreshes in the "
            f"measured window alone): {files['iceberg_metadata_files_max']} metadata files of "
            f"its Iceberg table, {files['delta_log_entries_max']} log entries of its Delta "
            "copy (maintenance and the catalog keep both bounded: docs/operations.md, "
            "*Maintenance*).", ""]


def _soak_row(name: str, v: dict[str, Any]) -> list[Any]:
    refreshes = ", ".join(f"{n} {m}" for m, n in sorted(v.get("refreshes", {}).items())) or "0"
    engines = ", ".join(f"{n} {e}" for e, n in sorted(v.get("engines", {}).items())) or "–"
    slo = v.get("pipeline", {}).get("slo")
    return [name, v["kind"], engines, f"{v['target_s']:g}", _s(v.get("p50_lag_s")),
            _s(v.get("p99_lag_s")), _s(v.get("max_lag_s")),
            "–" if v.get("slo") is None else f"{v['slo']:.3f}",
            "–" if slo is None else f"{slo:.3f}", refreshes, _s(v.get("refresh_mean_s")),
            _s(v.get("refresh_max_s"))]


def _soak_verdict(verdict: dict[str, Any], goals: dict[str, Any],
                  crash: dict[str, Any] | None) -> list[str]:
    """The goals of issue 19, each met or missed by how much."""
    def line(met: bool, what: str, miss: str) -> str:
        return f"- {'✓' if met else '✗'} {what}" + ("" if met else f": missed by {miss}")

    slo, p99 = verdict["fast_min_slo"] or 0.0, verdict["fast_max_p99_lag_s"] or 0.0
    slow = verdict["slow_min_p50_refresh_s"] or 0.0
    down = ([] if crash is None else [
        f"- ✗ `lakehouse run` stayed up: it exited with {crash['returncode']} "
        f"{crash['after_s']} s after every view was built (measured up to then): "
        f"`{crash['error']}`"])
    return ["Goals:", "", *down,
            line(verdict["slo_met"], f"fast views' SLO ≥ {goals['slo']}: lowest {slo:.3f}",
                 f"{goals['slo'] - slo:.3f}"),
            line(verdict["p99_met"], f"fast views' p99 lag ≤ {goals['p99_lag_s']:g} s: "
                 f"highest {p99:.2f} s", f"{p99 - goals['p99_lag_s']:.2f} s"),
            line(verdict["slow_met"], f"slow views' refreshes over {goals['slow_refresh_s']:g} s"
                 f" (median): shortest median {slow:.1f} s",
                 f"{goals['slow_refresh_s'] - slow:.1f} s"),
            line(verdict["rss_met"], "no RSS growth after the warm-up (at most "
                 f"{goals['rss_growth']:.0%}, last minute against the first, from the "
                 "source's first snapshot expiry): " + ", ".join(
                     f"{k.removesuffix('_mib')} {'–' if v is None else f'{v:+.1%}'}"
                     for k, v in verdict["rss_growth_share"].items()), "the growth shown"), ""]


def _soak_windows(soak: dict[str, Any]) -> list[str]:
    """The fast views' lag, window by window: steady, or growing over the soak."""
    fast = [v.get("lag_per_s", []) for v in soak["views"].values() if v["kind"] == "fast"]
    windows = lag_windows(fast, int(soak["warmup_s"]))
    if len(windows) < 2:
        return []
    rows = [[f"{w['from_s'] / 60:.0f}-{w['until_s'] / 60:.0f}", _s(w["p50_lag_s"]),
             _s(w["p99_lag_s"]), _s(w["max_lag_s"])] for w in windows]
    return ["Fast views' lag over the soak: the largest lag of each second, pooled over the "
            "fast views, in windows of 10 minutes after the warm-up (higher than the "
            "quantiles of the table above, which count every 0.15 s sample, not each "
            "second's largest).", ""] + _table(
        ["minutes", "p50 lag s", "p99 lag s", "max lag s"], rows)


RSS_COLUMNS = ["process", "first MiB", "last MiB", "growth MiB", "slope MiB/min",
               "second half's slope MiB/min", "max MiB"]
"""Columns of the soak's RSS growth tables (one row per process: :func:`_rss_rows`)."""


def _soak_rss(soak: dict[str, Any]) -> list[str]:
    options = soak.get("spark_conf", {}).get("spark.driver.extraJavaOptions", "")
    heap = (f"its heap committed at its start: `{options}`" if "-Xms" in options else
            "G1 grows and shrinks its committed heap, up to `spark.driver.memory`, with the "
            "slow views' allocations")
    since = soak.get("rss_since_s", soak["warmup_s"])
    lines = ["RSS (sampled every 5 s): `lakehouse run`'s Python process, its "
             f"JVM (the `java` child; {heap}), and the catalog service (`lakehouse serve`; "
             "its bounded caches fill as tables change: 64 MiB "
             "of `loadTable` bodies by default). Judged from "
             f"{since:.0f} s after every view was built: the writer's first snapshot expiry, "
             "from when the number of snapshots in the `events` source's metadata, which every "
             "refresh reads, stays between bounds (plotted); before it, each commit adds one. "
             "*first*, "
             "*last*: mean of the first and last minute (a third of the span when shorter); "
             "*slope*: least squares, over the judged time and over its second half (a "
             "leak keeps its slope; caches filling up to their bounds flatten out).", ""]
    lines += _table(RSS_COLUMNS, _rss_rows(soak["rss_growth"]))
    early = soak.get("rss_growth_from_warmup")
    if early and since > soak["warmup_s"]:
        lines += [f"The same from the end of the lag warm-up ({soak['warmup_s']:.0f} s), "
                  "while the source's metadata was still growing:", ""]
        lines += _table(RSS_COLUMNS, _rss_rows(early))
    parts = {key: growth(sampled, key, since) for key in MEMORY_PARTS
             if (sampled := [sample for sample in soak["rss"] if key in sample])}
    if parts:
        lines += ["What `lakehouse run` reports holding (`lakehouse_memory_bytes`, scraped "
                  "with each sample; docs/operations.md): Arrow's live allocations "
                  "(`arrow_pool`), the decoded source columns kept (`column_cache`) and "
                  "the aggregate states on the driver (`view_states`):", ""]
        lines += _table(["part", *RSS_COLUMNS[1:]], _rss_rows(parts))
    return lines


MEMORY_PARTS = ("arrow_pool_mib", "column_cache_mib", "view_states_mib")
"""The parts of ``lakehouse run``'s memory the soak samples from its ``/metrics``."""


def _rss_rows(growths: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """One row per process: its RSS growth (:func:`tests.benchmarks.soak_probes.growth`)."""
    return [[key.removesuffix("_mib"), g.get("first_mib", "–"), g.get("last_mib", "–"),
             g.get("growth_mib", "–"), g.get("slope_mib_per_min", "–"),
             g.get("late_slope_mib_per_min", "–"), g.get("max_mib", "–")]
            for key, g in growths.items()]


def _plot_soak(soak: dict[str, Any]) -> None:
    """Each view's lag (the largest of each second) and the RSS over the soak."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, v in soak["views"].items():
        ax.plot(v.get("lag_per_s", []), lw=0.8, label=name,
                ls="--" if v["kind"] == "slow" else "-")
    ax.axhline(5, color="red", ls=":", label="fast target 5 s")
    ax.axvline(soak["warmup_s"], color="grey", ls=":", label="end of warm-up")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since every view was built")
    ax.set_ylabel("lag (s), largest each second")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(PLOTS / "soak_lag.png", dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for key in ("python_mib", "jvm_mib", "catalog_mib", *MEMORY_PARTS):
        if any(key in sample for sample in soak["rss"]):
            ax.plot([s["t"] for s in soak["rss"]], [s.get(key) for s in soak["rss"]],
                    label=key.removesuffix("_mib"), ls=":" if key in MEMORY_PARTS else "-")
    ax.axvline(soak.get("rss_since_s", soak["warmup_s"]), color="grey", ls=":",
               label="RSS judged from")
    ax.set_xlabel("seconds since every view was built")
    ax.set_ylabel("RSS; dotted: parts held (MiB)")
    ax.legend(fontsize=7, loc="center right")
    ax.grid(alpha=0.3)
    counts = soak.get("source_snapshots", [])
    if counts:
        twin = ax.twinx()
        twin.plot([c["t"] for c in counts], [c["snapshots"] for c in counts], color="black",
                  lw=0.6, alpha=0.5)
        twin.set_ylabel("events snapshots (thin line)")
        twin.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(PLOTS / "soak_rss.png", dpi=90)
    plt.close(fig)


def _memory(results: dict[str, Any]) -> list[str]:
    rows = []
    for sf, entry in results.get("tpch", {}).get("scale_factors", {}).items():
        for b in entry.get("batches", []):
            for q in QUERIES:
                methods = [(f"incremental, {e}", r) for e, r in b[q]["incremental"].items()]
                methods += [(mode, b[q][mode]) for mode in ("full", "duckdb")]
                for method, r in methods:
                    rows.append((sf, q, method, r))
        for engine in engines_of(entry):  # the fixed changes: what a running refresher sees
            rows += [(sf, "all", f"incremental, {engine}, fixed changes", r)
                     for kind in ("insert", "delete_first", "delete", "delete_cow")
                     for q in QUERIES for r in fixed_runs(entry, kind, q, engine)]
    if not rows:
        return []
    peak: dict[tuple[str, str, str], dict[str, float | None]] = {}
    for sf, q, method, r in rows:
        cur = peak.setdefault((sf, q, method), {"driver": 0.0, "jvm_rss": 0.0, "total": None,
                                                "heap": 0.0})
        cur["driver"] = max(cur["driver"] or 0.0, r["driver_rss_mib"])
        cur["jvm_rss"] = max(cur["jvm_rss"] or 0.0, r.get("jvm_rss_mib", r["children_rss_mib"]))
        if r.get("driver_total_rss_mib") is not None:
            cur["total"] = max(cur["total"] or 0.0, r["driver_total_rss_mib"])
        cur["heap"] = max(cur["heap"] or 0.0, r.get("jvm_heap_peak_mib") or 0.0)
    lines = ["## Peak memory", "",
             "Per TPC-H benchmark, the highest peak over all batch sizes (and, per engine, "
             "over the fixed changes of *Scaling*): driver (Python) RSS, "
             "the JVM's RSS (the `java` child process of the driver; it holds the RSS it once "
             "grew to; results without it: every child process), "
             "both together (the driver's RSS, Python + JVM: peak of their sum), "
             "and the JVM heap in use (sum of heap pools' peak, reset after a GC before each "
             "refresh). With a large maximum heap the JVM collects lazily, so the heap peak "
             "includes garbage not yet collected: it bounds, and overstates, what a refresh "
             "needs. DuckDB runs inside the driver. In local mode the JVM also runs the "
             "executors; on a cluster they are elsewhere. The driver's peak over each scale "
             "factor's whole run is in *Machine*. Catalog server and `lakehouse run` "
             "figures are in their sections.", ""]
    lines += _table(["SF", "view", "method", "driver RSS MiB", "JVM RSS MiB",
                     "driver + JVM RSS MiB", "JVM heap peak MiB"],
                    [[sf, q, method, v["driver"], v["jvm_rss"],
                      "–" if v["total"] is None else v["total"], v["heap"] or "–"]
                     for (sf, q, method), v in peak.items()])
    return lines


def write_report(results: dict[str, Any] | None = None) -> Path:
    """Write docs/benchmarks.md (and the PNGs beside results.json); return its path.

    Both follow the results file (:func:`tests.benchmarks.common.use_output`).
    """
    global PLOTS
    results = normalize(results if results is not None else read_results())
    PLOTS = common.RESULTS.parent
    doc = common.report_path()
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
    lines += findings(results)
    lines += _tpch(tpch) + _scaling(tpch) + _crossover(results.get("crossover", {}))
    lines += _catalog(results.get("catalog", {}))
    lines += _freshness(results.get("freshness", {})) + _cli(results.get("cli", {}))
    lines += _soak(results.get("soak", {}))
    lines += _memory(results) + _profiles(tpch)
    lines += OTHER
    doc.write_text("\n".join(lines).rstrip() + "\n")
    return doc


OTHER = [
    "## Other benchmarks (run separately)", "",
    "Each takes several minutes on this machine, so they are not part of `make bench`; their "
    "results are in the documents named.", "",
    "- `python -m tests.benchmarks.sink_apply [--nodelay]`: one refresh's sink work for a "
    "10-row delta on a 100,000-row view table, Spark `MERGE` path against the pyiceberg Arrow "
    "path, next to the floor (docs/sinks.md).",
    "- `python -m tests.benchmarks.change_feed`: the change feed of a scattered 0.1% "
    "`lineitem` delete, copy-on-write against merge-on-read, before and after the Arrow "
    "diff (docs/change-feeds.md).",
    "- `python -m tests.benchmarks.arrow_diff`: the multiset difference of two versions of "
    "`lineitem` in memory: row hash, row hash with the column check, DuckDB `EXCEPT ALL` "
    "(docs/change-feeds.md).", "",
]
"""The micro-benchmarks that are scripts of their own."""
