"""Time multiset differences of two Arrow tables: ``python -m tests.benchmarks.arrow_diff``.

The case is a copy-on-write delete: ``old`` is TPC-H ``lineitem``, ``new`` the same rows
without a scattered 0.1% of them, in the same order (a rewrite that keeps the file order) or
shuffled. Compared: :func:`lakehouse.sources.arrow_diff.difference` (hash, pairs checked
column by column: exact), the same without the check (hash counts only: not exact under a
collision), and DuckDB's ``EXCEPT ALL`` both ways (exact).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ivm.arrow_diff import difference, row_hashes
from tests.benchmarks.common import WORK, load_average
from tests.benchmarks.tpch_refresh import generate_cached


def _tables(sf: float, fraction: float, shuffled: bool) -> tuple[pa.Table, pa.Table]:
    old = pq.read_table(generate_cached(sf) / "lineitem.parquet")
    old = old.cast(pa.schema([f.with_type(pa.large_string()) if pa.types.is_string_view(f.type)
                              else f for f in old.schema]))
    rng = np.random.default_rng(7)
    keep = np.ones(old.num_rows, bool)
    keep[rng.choice(old.num_rows, int(old.num_rows * fraction), replace=False)] = False
    new = old.filter(pa.array(keep))
    if shuffled:
        new = new.take(pa.array(rng.permutation(new.num_rows)))
    return new, old


def _except_all(new: pa.Table, old: pa.Table) -> int:
    with duckdb.connect() as con:
        con.register("n", new)
        con.register("o", old)
        added = con.execute("SELECT count(*) FROM (FROM n EXCEPT ALL FROM o)").fetchone()
        removed = con.execute("SELECT count(*) FROM (FROM o EXCEPT ALL FROM n)").fetchone()
    return int(added[0] + removed[0]) if added and removed else -1


def _hash_counts(new: pa.Table, old: pa.Table) -> int:
    hashes = np.concatenate([row_hashes(new), row_hashes(old)])
    weights = np.concatenate([np.ones(new.num_rows), -np.ones(old.num_rows)])
    unique, inverse = np.unique(hashes, return_inverse=True)
    changed = unique[np.bincount(inverse, weights) != 0]
    rows = pa.concat_tables([new, old]).filter(pa.array(np.isin(hashes, changed)))
    return rows.num_rows


def _timed(method: Callable[[pa.Table, pa.Table], int], new: pa.Table, old: pa.Table,
           repeats: int) -> dict[str, float | int]:
    times, rows = [], -1
    for _ in range(repeats):
        started = time.perf_counter()
        rows = method(new, old)
        times.append(time.perf_counter() - started)
    return {"best_s": round(min(times), 2), "median_s": round(float(np.median(times)), 2),
            "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.arrow_diff",
                                     description=__doc__)
    parser.add_argument("--scale-factor", type=float, default=0.2)
    parser.add_argument("--fraction", type=float, default=0.001)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = []
    for shuffled in (False, True):
        new, old = _tables(args.scale_factor, args.fraction, shuffled)
        methods: list[tuple[str, Callable[[pa.Table, pa.Table], int]]] = [
            ("difference (hash, checked)", lambda n, o: difference(n, o).num_rows),
            ("hash counts (unchecked)", _hash_counts),
            ("EXCEPT ALL both ways", _except_all)]
        for name, method in methods:
            load = load_average()
            result = {"method": name, "shuffled": shuffled, "rows_old": old.num_rows,
                      "rows_new": new.num_rows, **_timed(method, new, old, args.repeats),
                      "load": load[0]}
            results.append(result)
            print(json.dumps(result), flush=True)
    (WORK / "arrow_diff.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
