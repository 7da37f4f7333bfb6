"""The *Findings* of docs/benchmarks.md, derived from docs/benchmarks/results.json.

Every number here is computed from the results, so the text cannot go stale when the
benchmark is run again; only the explanations of *why* are prose.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from lakehouse.config import DEFAULT_FULL_REFRESH_RATIO
from tests.benchmarks.crossings import KINDS, RATIO_STEP, Crossover, crossovers, ratio_from
from tests.benchmarks.profile import categorize
from tests.benchmarks.targets import (
    DEFAULT_ENGINE,
    FIXED_KINDS,
    FLOOR_ENGINES,
    JOIN_VIEWS,
    QUERIES,
    TARGETS,
    all_engines,
    compared,
    engines_of,
    fixed,
    fixed_runs,
    floor_s,
    normalize,
    speedup_goal,
    targets,
)

GROUPS = (("speed-up over Spark's full refresh", "full / incremental"),
          ("speed-up over DuckDB's recompute", "duckdb / incremental"),
          ("scaling", " / SF "), ("refresh / floor", "refresh / floor"),
          ("catalog loadTable", "loadTable"), ("freshness", "freshness"))
LOCAL = DEFAULT_ENGINE
"""The engine whose ticks the prose on the driver's path (column cache, profiles) is about."""


def _span(values: Iterable[float], unit: str = "", digits: int = 1) -> str:
    """``1.2-3.4×`` (or one value when all are equal at ``digits``)."""
    items = sorted(values)
    if not items:
        return "–"
    low, high = f"{items[0]:.{digits}f}", f"{items[-1]:.{digits}f}"
    return f"{low}{unit}" if low == high else f"{low}-{high}{unit}"


def _loads(node: Any) -> list[float]:
    """Every ``load`` value (1-minute load average) recorded under ``node``."""
    if isinstance(node, dict):
        found = [float(v[0] if isinstance(v, list) else v) for k, v in node.items()
                 if k == "load" and isinstance(v, int | float | list) and v]
        return found + [x for k, v in node.items() if k != "load" for x in _loads(v)]
    if isinstance(node, list):
        return [x for v in node for x in _loads(v)]
    return []


def _intro(results: dict[str, Any]) -> str:
    parts = [f"{_span(_loads(results[p]))} during the {label}" for p, label in
             (("tpch", "TPC-H part"), ("catalog", "catalog part"), ("freshness", "freshness run"),
              ("crossover", "crossover part"))
             if _loads(results.get(p))]
    return ("Measured on a 2-core machine; the 1-minute load average was "
            + ", ".join(parts) + " (*load* columns). It counts the benchmark's own threads "
            "(the driver's readers, Spark's executors, the catalog server), so a part running "
            "alone shows 2-3; more means other processes competed for the cores and absolute "
            "times are inflated. The incremental, full and DuckDB refreshes of one batch run "
            "within a minute of each other, so their ratios are less affected than their "
            "absolute times.")


def _summary(rows: list[list[str]]) -> str:
    parts = []
    for label, marker in GROUPS:
        group = [r for r in rows if marker in r[0]]
        if not group:
            continue
        missed = [r for r in group if "missed" in r[3]]
        text = f"{label} {len(group) - len(missed)} of {len(group)}"
        if missed:
            text += " (missed by " + _span(
                float(r[3].split("(")[1].split("×")[0]) for r in missed) + "×)"
        parts.append(text)
    met = sum("**met**" in r[3] for r in rows)
    return f"**{met} of {len(rows)} targets met**: " + "; ".join(parts) + "."


def _ratios(batches: list[dict[str, Any]], kind: str, views: tuple[str, ...],
            num: str, den: str, engine: str) -> list[float]:
    """``num`` / ``den`` seconds over ``batches`` of ``kind``: ``incremental`` is
    ``engine``'s refresh."""
    def seconds(b: dict[str, Any], q: str, mode: str) -> float | None:
        sample = b[q]["incremental"].get(engine) if mode == "incremental" else b[q][mode]
        return sample["s"] if sample else None

    return [n / d for b in batches if b["kind"] == kind for q in views
            if (n := seconds(b, q, num)) is not None and (d := seconds(b, q, den))]


def _full_over_inc(batches: list[dict[str, Any]], kind: str, engine: str) -> str:
    """``inserts Q1 4.7-11.7×, Q3/Q5 5.1-11.0×``: Spark's full refresh / ``engine``'s."""
    q1 = _ratios(batches, kind, ("q1",), "full", "incremental", engine)
    joins = _ratios(batches, kind, JOIN_VIEWS, "full", "incremental", engine)
    return f"{kind}s Q1 {_span(q1, '×')}, Q3/Q5 {_span(joins, '×')}"


def _speed(sfs: dict[str, Any]) -> list[str]:
    out = []
    for sf, entry in sfs.items():
        batches = entry.get("batches") or []
        kinds = [k for k in FIXED_KINDS if any(b["kind"] == k for b in batches)]
        if not kinds:
            continue
        duck = [b[q]["duckdb"]["s"] for b in batches for q in QUERIES]
        for engine in engines_of(entry):
            parts = [_full_over_inc(batches, kind, engine) for kind in kinds]
            inc = [b[q]["incremental"][engine]["s"] for b in batches for q in QUERIES
                   if engine in b[q]["incremental"]]
            versus = [r for kind in kinds
                      for r in _ratios(batches, kind, QUERIES, "duckdb", "incremental", engine)]
            out.append(f"SF {sf}, `engine: {engine}`: Spark's full refresh takes this many "
                       "times the incremental refresh's time (above 1×: incremental is "
                       "faster): " + "; ".join(parts) + " (all batch sizes). Incremental "
                       f"refreshes take {_span(inc, ' s')}; DuckDB's recompute of the same SQL "
                       f"takes {_span(duck, ' s', 2)}, {_span(versus, '×')} the incremental "
                       "refresh's time (DuckDB writes nothing; the refresh commits to two "
                       "sinks).")
    return out


def _growth(sfs: dict[str, Any]) -> list[str]:
    out = []
    for sf, entry in sfs.items():
        inserts = [b for b in entry.get("batches") or [] if b["kind"] == "insert"]
        if len(inserts) < 2:
            continue
        small, big = inserts[0], inserts[-1]
        rows = big["change"]["rows"]["lineitem"] / max(small["change"]["rows"]["lineitem"], 1)
        full = [big[q]["full"]["s"] / small[q]["full"]["s"] for q in QUERIES]
        growth = {e: [big[q]["incremental"][e]["s"] / small[q]["incremental"][e]["s"]
                      for q in QUERIES
                      if e in big[q]["incremental"] and e in small[q]["incremental"]]
                  for e in engines_of(entry)}
        out.append(f"SF {sf}: from a {small['fraction']:.1%} to a {big['fraction']:.1%} insert "
                   f"({rows:.0f}× the rows) the incremental refresh takes "
                   + ", ".join(f"{_span(g, '×')} as long with `engine: {e}`"
                               for e, g in growth.items() if g)
                   + f" (Spark's full refresh {_span(full, '×')}).")
    return out


def _scaling(sfs: dict[str, Any]) -> str | None:
    if len(sfs) < 2:
        return None
    small, big = compared(sfs)
    loads = [statistics.median(_loads(sfs[sf].get("scaling", {})) or [0]) for sf in (small, big)]
    texts = []
    for engine in all_engines(sfs):
        parts = _scaling_ratios(sfs, small, big, engine)
        if not parts:
            continue
        beyond = [f"SF {sf} / SF {small} = " + ", ".join(ratios)
                  for sf in sorted(sfs, key=float) if float(sf) > float(big)
                  if (ratios := _scaling_ratios(sfs, small, sf, engine))]
        texts.append(f"`engine: {engine}` SF {big} / SF {small} = " + ", ".join(parts)
                     + "".join(f"; {b} (no goal)" for b in beyond))
    return ("**Scaling**: a fixed 250-order change refreshes in this many times its time at "
            "the smaller scale factor: " + "; ".join(texts)
            + f" (goal ≤ {TARGETS['scaling']:g}× for SF {big} / SF {small}; median load "
            f"{loads[0]:.1f} at SF {small}, {loads[1]:.1f} at SF {big}).") if texts else None


def _scaling_ratios(sfs: dict[str, Any], small: str, big: str,
                    engine: str = DEFAULT_ENGINE) -> list[str]:
    """``insert 1.06-1.19×`` and ``delete ...``: fixed-change refresh times, ``big`` / ``small``."""
    parts = []
    for kind in FIXED_KINDS:
        pairs = [(fixed(sfs[small], kind, q, engine), fixed(sfs[big], kind, q, engine))
                 for q in QUERIES]
        ratios = [b / a for a, b in pairs if a and b]
        if ratios:
            parts.append(f"{kind} {_span(ratios, '×', 2)}")
    return parts


def _floor(sfs: dict[str, Any]) -> str | None:
    parts, old = [], []
    for sf, entry in sfs.items():
        insert_s = (entry.get("floor_spark_insert") or {}).get("s")
        if insert_s:
            old.append(f"SF {sf} {insert_s:.2f} s")
        floor = floor_s(entry)
        if not floor:
            continue
        ratios = [f"`engine: {e}` " + ", ".join(
            f"{k} {_span(r, '×')}" for k in FIXED_KINDS
            if (r := [v / floor for q in QUERIES if (v := fixed(entry, k, q, e))]))
            for e in engines_of(entry)]
        parts.append(f"SF {sf}: floor {floor:.3f} s, refresh / floor " + "; ".join(ratios))
    engines = ", ".join(f"`engine: {e}`" for e in FLOOR_ENGINES)
    text = ("**Floor** (a one-row pyiceberg append through the same catalog): "
            + "; ".join(parts) + f" (goal ≤ {TARGETS['floor']:g}× at the smallest scale "
            f"factor, for {engines})." if parts else
            "**Floor**: these results predate the pyiceberg-append floor, so the floor target "
            "is not measured.")
    if old:
        text += (" The former floor, a one-row Spark `INSERT` through the same catalog "
                 "(no longer a target): " + ", ".join(old) + ".")
    return text if parts or old else None


def _deletes(sfs: dict[str, Any]) -> str | None:
    parts = []
    for sf, entry in sfs.items():
        for engine in engines_of(entry):
            mor = [v for q in QUERIES if (v := fixed(entry, "delete", q, engine))]
            cow = [v for q in QUERIES if (v := fixed(entry, "delete_cow", q, engine))]
            if mor and cow:
                parts.append(f"SF {sf} `engine: {engine}`: merge-on-read {_span(mor, ' s')}, "
                             f"copy-on-write {_span(cow, ' s')}")
    if not parts:
        return None
    return ("**Deletes, source layout**: the sources are merge-on-read, so an RF2 delete's "
            "change feed reads only the row groups holding deleted positions. The same fixed "
            "250-order delete refreshes (Q1, Q3, Q5) in " + "; ".join(parts) + ". Under "
            "copy-on-write every data file holding a deleted row is rewritten, and the change "
            "feed reads those files at both snapshots (docs/change-feeds.md).")


def _delete_costs(sfs: dict[str, Any]) -> str | None:
    big = compared(sfs)[1] if sfs else None
    entry = sfs.get(big, {}) if big else {}
    feeds = {k: [categorize(p["breakdown"], p["s"])["change feeds, snapshots"]
                 for n, p in (entry.get("profile") or {}).items()
                 if n.endswith(k) and "breakdown" in p and p.get("engine") == LOCAL]
             for k in FIXED_KINDS}
    groups = entry.get("load", {}).get("tables", {}).get("lineitem", {}).get("row_groups")
    joins = {k: [v for q in JOIN_VIEWS if (v := fixed(entry, k, q, LOCAL))] for k in FIXED_KINDS}
    if not (feeds["delete"] and feeds["insert"] and groups and all(joins.values())):
        return None
    first = [v for q in QUERIES if (v := fixed(entry, "delete_first", q, LOCAL))]
    return (f"**Why deletes cost more than inserts** (SF {big}, `engine: {LOCAL}`): "
            "`lineitem` was loaded as "
            f"{groups['count']} Parquet row groups of up to {groups['max_rows']:,} rows; 250 "
            "orders picked at random hit nearly every one, and the change feed takes each "
            "deleted row from its row group, decoded (only the columns the view reads). The "
            "refresher keeps decoded columns between ticks (`column_cache_bytes`, a quarter "
            "of the memory by default; data files never change), so only the first delete "
            "after start decodes "
            "them{f}. Profiled delete refreshes spent {d} s in change feeds, inserts "
            "{i} s. In the join views each partner is read restricted by the keys of the "
            "change or of the partners read before it (semi-join reduction), found by binary "
            "search in a kept sorted index of each data file's key column, and the rest of its "
            "columns are decoded only at matching rows; the delta terms read a partner after "
            "its deletes: after orders are deleted with their line items, the orders' term "
            "finds no line item and reads nothing else. The fixed change in Q3/Q5: inserts "
            "{ji} s, deletes {jd} s.").format(
        d=_span(feeds["delete"]), i=_span(feeds["insert"]), ji=_span(joins["insert"]),
        jd=_span(joins["delete"]),
        f=(f": the first fixed delete refreshed in {_span(first, ' s')}, the next one in "
           f"{_span([v for q in QUERIES if (v := fixed(entry, 'delete', q, LOCAL))], ' s')} (the "
           "*Scaling* table)") if first else "")


def _profile(sfs: dict[str, Any]) -> str | None:
    big = compared(sfs)[1] if sfs else None
    profiles = (sfs[big].get("profile") or {}) if big else {}
    parts, totals = [], dict[str, float]()
    for name, prof in profiles.items():
        if "breakdown" not in prof or prof.get("engine") != LOCAL:
            continue
        split = categorize(prof["breakdown"], prof["s"])
        for label, seconds in split.items():
            totals[label] = totals.get(label, 0.0) + seconds
        top = sorted(split.items(), key=lambda kv: -kv[1])[:2]
        parts.append(f"{name.replace('_', ' ')} {prof['s']:.1f} s, "
                     f"{spark_jobs(prof['spark_jobs'])} ("
                     + ", ".join(f"{k} {v:.1f} s" for k, v in top) + ")")
    if not parts:
        return None
    whole = sum(totals.values())
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:3]
    return (f"**Where a refresh's time goes** (SF {big}, `engine: {LOCAL}`, fixed change, "
            "driver-side cProfile, "
            "section *Profiles*): " + "; ".join(parts) + ". Over these refreshes: "
            + ", ".join(f"{k} {v / whole:.0%}" for k, v in ranked) + " of the time.")


def _checks(sfs: dict[str, Any]) -> str | None:
    compared, wrong, duck_wrong = 0, [], []
    for sf, entry in sfs.items():
        checks = [(f"SF {sf} {b['fraction']:.1%} {b['kind']} {q} ({e})", c)
                  for b in entry.get("batches") or [] for q in QUERIES
                  for e, c in (b[q].get("check") or {}).items()]
        checks += [(f"SF {sf} fixed changes {q} ({e})", c)
                   for q, by_engine in (entry.get("scaling", {}).get("check") or {}).items()
                   for e, c in by_engine.items()]
        for label, check in checks:
            if not check:
                continue
            compared += 1
            wrong += [label] * (check["full"]["mismatched"] > 0)
            duck_wrong += [label] * (check.get("duckdb", {}).get("mismatched", 0) > 0)
    if not compared:
        return None
    text = (f"**Correctness**: after each of {compared} refreshes checked (every engine's "
            "view), the incremental view's rows were compared with the full view's (same SQL "
            "recomputed by Spark at the same frontier) and with DuckDB's result: ")
    text += ("all equal." if not wrong else f"{len(wrong)} differ from the full view: "
             + ", ".join(wrong) + ".")
    if duck_wrong:
        text += f" DuckDB's result differs for {', '.join(duck_wrong)}."
    return text


def _crossover(part: dict[str, Any]) -> str | None:
    cpu, wall = crossovers(part, "cpu_s"), crossovers(part, "s")
    if not cpu:
        return None

    def listed(found: dict[tuple[str, str], Crossover]) -> str:
        return "; ".join(f"{q.upper()} " + ", ".join(
            f"{k}s {found[(q, k)].text()}" for k in KINDS if (q, k) in found)
            for q in part["queries"])

    checks = [b[q]["check"]["full"]["mismatched"] for b in part["batches"]
              for q in part["queries"] if "check" in b[q]]
    wrong = sum(m > 0 for m in checks)
    loads = _loads(part)
    text = (f"**Crossover** (SF {part['scale_factor']:g}, section *Crossover*): Spark's full "
            "refresh costs less CPU than the incremental one from a change of "
            + listed(cpu) + " of the view's sources' rows (by wall time, at a load of "
            f"{_span(loads)}: {listed(wall)}). In {len(checks)} checks (every view after every "
            "batch) the incremental view " + ("equalled the full one." if not wrong else
                                              f"differed from the full one {wrong} times."))
    below = [f"{q.upper()} {k}s" for (q, k), c in cpu.items() if c.bound == "below"]
    if below:
        text += (" For " + ", ".join(below) + " the full refresh was cheaper at every share "
                 "measured: at this scale a scattered delete costs the incremental plan more "
                 "than a full refresh whatever its size (its change feed decodes every row "
                 "group holding a deleted position, and a join's key ranges span the table: "
                 "item *Why deletes cost more than inserts*), which no threshold on the "
                 "change's size can separate; a threshold low enough to catch them would "
                 "recompute almost every change of the other views in full.")
    ratio = ratio_from(cpu)
    if ratio is None:
        return text + (" No crossover lies in the measured range: this run cannot place "
                       "`full_refresh_ratio`.")
    verdict = ("which is the default" if abs(ratio - DEFAULT_FULL_REFRESH_RATIO) < 1e-9 else
               f"but the default is {DEFAULT_FULL_REFRESH_RATIO:g}: update "
               "`lakehouse/config.py`")
    return text + (f" The lowest of the others by CPU time (an *above* bound counting as its "
                   f"share), rounded down to {RATIO_STEP:.0%}, gives `full_refresh_ratio` "
                   f"{ratio:g}, {verdict}. CPU time rather than wall time: on this shared "
                   "machine the wall time of the same full refresh swings up to 2× between "
                   "batches, and *cheaper* is what `auto` promises.")


def _catalog(cat: dict[str, Any]) -> list[str]:
    if not cat:
        return []
    cpu = {k: [r["server_cpu_us"] for r in cat.get(k, []) if r.get("server_cpu_us")]
           for k in ("load_table", "load_table_etag", "load_table_route", "trivial")}
    commits = ", ".join(f"{c['commits_per_s']}/s with {c['writers']}" for c in cat["commits"])
    return [
        f"**Catalog `loadTable`** costs the server {_span(cpu['load_table'], ' µs', 0)} of CPU "
        f"per request ({_span(cpu['load_table_etag'], ' µs', 0)} for a 304), a trivial "
        f"FastAPI endpoint {_span(cpu['trivial'], ' µs', 0)}: the fast path answers a plain "
        "`GET` before FastAPI's routing. Through the route it costs "
        f"{_span(cpu['load_table_route'], ' µs', 0)}. Rates swing up to 2× between rounds "
        "under this load (*rps_runs* in results.json), so some shares exceed 100%; the CPU "
        "column is the steadier measure.",
        f"**Commits on one table**: {commits} pyiceberg writer(s); more writers commit less "
        "in total because most attempts lose the optimistic race and retry with back-off "
        "(the catalog answers each conflict with a 409).",
    ]


def _freshness(fresh: dict[str, Any]) -> str | None:
    if not fresh:
        return None
    poll = fresh.get("on_change_poll_s")
    poll_text = f"an `on_change` poll every {poll:g} s" if poll else "the `on_change` poll"
    verdict = "met" if fresh["p50_s"] <= 5 else "missed"
    return (f"**Freshness** p50 {fresh['p50_s']:.2f} s, p95 {fresh['p95_s']:.2f} s, max "
            f"{fresh['max_s']:.2f} s (target p50 ≤ 5 s {verdict}): {poll_text} plus one "
            f"incremental refresh of a one-row change; the first commit took "
            f"{fresh['lags_s'][0]:.1f} s (JVM warm-up).")


def ran_on(samples: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many of ``samples`` (refreshes) ran on each engine (``?``: not recorded)."""
    counts: dict[str, int] = {}
    for sample in samples:
        engine = sample.get("engine", "?")
        counts[engine] = counts.get(engine, 0) + 1
    return counts


def engine_samples(entry: dict[str, Any], engine: str) -> list[dict[str, Any]]:
    """Every timed incremental refresh of ``engine``'s views in one (normalized) entry."""
    samples = [r for kind in ("insert", "delete_first", "delete", "delete_cow")
               for q in QUERIES for r in fixed_runs(entry, kind, q, engine)]
    return samples + [b[q]["incremental"][engine] for b in entry.get("batches") or []
                      for q in QUERIES if engine in b[q]["incremental"]]


def _engines(sfs: dict[str, Any]) -> str | None:
    """Where each engine's timed refreshes ran, and why when not where the setting says."""
    parts, odd = [], []
    for sf, entry in sfs.items():
        for engine in engines_of(entry):
            samples = engine_samples(entry, engine)
            counts = ran_on(samples)
            if set(counts) == {"?"}:
                continue
            parts.append(f"SF {sf} `engine: {engine}`: " + ", ".join(
                f"{n} on {e}" for e, n in sorted(counts.items())))
            if engine != "auto":
                expected = "spark" if engine == "spark" else "local"
                reasons = sorted({s.get("engine_reason", "")[:120] for s in samples
                                  if s.get("engine") not in (expected, None)})
                if reasons:
                    odd.append(f"SF {sf} `engine: {engine}` ran elsewhere than {expected}: "
                               + "; ".join(reasons))
            else:
                reasons = sorted({s.get("engine_reason", "")[:120] for s in samples
                                  if s.get("engine") == "spark"})
                if reasons:
                    parts[-1] += " (on Spark because: " + "; ".join(reasons) + ")"
    if not parts:
        return None
    text = ("**Engines**: the timed incremental refreshes ran on (`RefreshResult.engine`) "
            + "; ".join(parts) + ".")
    return text + (" **Not where the setting says**: " + "; ".join(odd) + "."
                   if odd else "")


def _driver_memory(sfs: dict[str, Any]) -> str | None:
    """The driver's peak RSS (Python and its JVM) per scale factor and per engine."""
    parts = []
    for sf, entry in sfs.items():
        meta = entry.get("meta") or {}
        peak = (meta.get("driver_peak") or {}).get("driver_total_rss_mib")
        if peak is None:
            continue
        engines = ", ".join(
            f"`engine: {e}` {max(totals):,.0f} MiB" for e in engines_of(entry)
            if (totals := [s["driver_total_rss_mib"] for s in engine_samples(entry, e)
                           if s.get("driver_total_rss_mib") is not None]))
        parts.append(f"SF {sf} ({meta.get('master')}, driver memory "
                     f"{meta.get('driver_memory')}): {peak:,.0f} MiB over the run"
                     + (f"; during incremental refreshes {engines}" if engines else ""))
    if not parts:
        return None
    return ("**Driver memory**: peak RSS of the driver, Python and its JVM together (in "
            "local mode the JVM runs the executors too; the run's peak includes loading the "
            "tables, full refreshes and DuckDB's recomputes, in the driver's process): "
            + "; ".join(parts) + ".")


def findings(results: dict[str, Any]) -> list[str]:
    """The Findings section: markdown lines."""
    results = normalize(results)
    sfs = results.get("tpch", {}).get("scale_factors", {})
    items: list[str | None] = [_summary(targets(results)), *_speed(sfs), *_growth(sfs)]
    items += [_engines(sfs), _scaling(sfs), _floor(sfs), _driver_memory(sfs), _profile(sfs),
              _deletes(sfs), _delete_costs(sfs), _checks(sfs),
              _crossover(results.get("crossover", {}))]
    items += _catalog(results.get("catalog", {})) + [_freshness(results.get("freshness", {}))]
    lines = ["## Findings", "", _intro(results), ""]
    lines += [f"{i}. {text}" for i, text in enumerate((t for t in items if t), start=1)]
    return lines + [""] + what_is_left(results)


def _jobs(sfs: dict[str, Any]) -> list[int]:
    return [b[q]["incremental"][LOCAL]["spark_jobs"] for e in sfs.values()
            for b in e.get("batches") or [] for q in QUERIES
            if "spark_jobs" in b[q]["incremental"].get(LOCAL, {})]


def _needed(sfs: dict[str, Any]) -> str:
    """What the speed-up target asks of a refresh at the largest scale factor, in seconds."""
    big = compared(sfs)[1]
    entry = sfs[big]
    small = [b for b in entry.get("batches") or [] if b["fraction"] == 0.001]
    floor, label = floor_s(entry), "the floor"
    if not floor:  # results from before the pyiceberg floor
        floor, label = (entry.get("floor_spark_insert") or {}).get("s"), "the Spark INSERT floor"
    if not small or not floor:
        return ""
    needed = [b[q]["full"]["s"] / speedup_goal(q) for b in small for q in QUERIES]
    return (f" At SF {big} the speed-up targets ask for refreshes of {_span(needed, ' s', 2)} "
            f"({_span([n / floor for n in needed], '×')} {label}): the same fixed cost.")


def _past_the_budget(sfs: dict[str, Any]) -> list[str]:
    """The bullet on scattered deletes at the scale factors past the compared ones."""
    big = compared(sfs)[1] if sfs else None
    out = []
    for sf in sorted(sfs, key=float):
        if big is None or float(sf) <= float(big):
            continue
        entry = sfs[sf]
        rows = entry.get("load", {}).get("tables", {}).get("lineitem", {}).get(
            "total-records")
        deletes = {q: v for q in QUERIES if (v := fixed(entry, "delete", q, LOCAL))}
        jobs = {n: p["spark_jobs"] for n, p in (entry.get("profile") or {}).items()
                if n.endswith("delete") and p.get("engine") == LOCAL}
        budgets = entry.get("budgets")
        if not deletes or not rows or not budgets:
            continue
        times = ", ".join(f"{q.upper()} {v:.2f} s" for q, v in deletes.items())
        profiled = ", ".join(f"{n.replace('_', ' ')} {spark_jobs(j)}" for n, j in jobs.items())
        out.append(
            f"- **Scattered deletes at SF {sf}** ({rows:,} line items, `engine: {LOCAL}`): a "
            "fixed delete "
            f"refreshes in {times} (profiled: {profiled}). The driver's budgets: "
            f"`column_cache_bytes` {budgets['column_cache_bytes'] / 2**30:.1f} GiB (by "
            "default a quarter of the memory the process may use), holding "
            f"{budgets['kept_bytes'] / 2**30:.1f} GiB of decoded columns, key indexes and "
            "delete positions after the run; partner reads of up to "
            f"{budgets['driver_read_max_rows']:,} rows per table on the driver (as many as "
            "the cache can keep, `Config.driver_read_max_rows`). Past them (a source whose "
            "columns the views read exceed the cache), every scattered delete decodes the row "
            "groups it hits again and the join views' terms run on Spark: with the former "
            "fixed budgets (1 GiB, ten million rows) these refreshes took 1.1-4.0 s at SF 3.")
    return out


def spark_jobs(count: int) -> str:
    """``1 Spark job``, ``2 Spark jobs``."""
    return f"{count} Spark job{'' if count == 1 else 's'}"


def what_is_left(results: dict[str, Any]) -> list[str]:
    """The section naming the remaining costs and where they are, with measured numbers."""
    sfs = normalize(results).get("tpch", {}).get("scale_factors", {})
    jobs = _jobs(sfs)
    if not sfs or not jobs:
        return []
    inserts = [(categorize(p["breakdown"], p["s"])["view delta (ivm)"], p["s"])
               for e in sfs.values() for n, p in (e.get("profile") or {}).items()
               if n.endswith("insert") and "breakdown" in p and p.get("engine") == LOCAL]
    share = (f"{_span([i for i, _ in inserts], ' s')} of the profiled insert refreshes' "
             f"{_span([t for _, t in inserts], ' s')}") if inserts else "see *Profiles*"
    return ["### What is left (for the owners of `ivm/` and `lakehouse/sources/`)", "",
            f"- **Spark jobs per refresh** (`ivm/evaluate.py` `maintain`: {share}): an "
            f"incremental refresh with `engine: {LOCAL}` runs {_span(jobs, '', 0)} "
            "Spark jobs (*inc Spark jobs*), each paying scheduling and planning whatever its "
            "data. Change feeds are computed in Arrow, an aggregate state of plain "
            "SUM/COUNT/AVG outputs is held on the driver (`ivm/state_local.py`), and the "
            "block's delta terms are run by DuckDB in process (`ivm/local_engine.py`): the change "
            "feed joined with the partners' rows that match its keys, read by pyiceberg "
            "(`ivm/driver_delta.py`). A refresh then runs no Spark job, unless a partner "
            "restricted to the change's keys still spans more rows of data files than the "
            "column cache can keep decoded (`Config.driver_read_max_rows`: "
            "`column_cache_bytes` / 64, at least ten million)."
            + _needed(sfs),
            "- **Cold deletes** (`lakehouse/sources/iceberg_positions.py`): the first delete "
            "after the refresher starts decodes every row group holding a deleted row (with "
            "Spark's default 128 MB row groups, nearly the whole table for a scattered delete); "
            "later ones read the decoded columns from `lakehouse/sources/column_cache.py`, "
            "bounded by `column_cache_bytes`. A source larger than the budget pays the decoding "
            "on every delete. The Parquet page index (which pyarrow does not expose) would not "
            "save much: with Iceberg's 20,000-row pages, 250 orders scattered over SF 1's 6M "
            "line items touch more than half of every column's pages.",
            *_past_the_budget(sfs),
            "- **Fixed costs of a tick** (section *Profiles*): a tick loads each source's "
            "metadata from the catalog once (its readers are pinned for the tick: the target "
            "versions, the schema check and the change feeds share the load), decodes only "
            "the manifests and position delete files written since the last tick (their "
            "entries and positions are kept, `lakehouse/sources/manifest_cache.py` and "
            "`column_cache.py`, with the union of each data file's deleted positions and its "
            "footer, so a data file whose columns are kept is not opened), and resolves no "
            "snapshot in Spark unless a Spark query reads it. What remains is a catalog "
            "round trip per source and two for the view table "
            "(its frontier, the commit), the Delta sink's log read and commit (at once "
            "with the Iceberg one, `lakehouse/sink_commits.py`), and the partner "
            "reads: each a few milliseconds, Python-bound on 2 cores.", ""]
