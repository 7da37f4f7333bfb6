"""Run the benchmarks and write docs/benchmarks.md: ``python -m tests.benchmarks [--help]``.

The defaults (what ``make bench`` runs) take about 25 minutes on 2 cores (more under load,
and the first time, which generates 1 GB of TPC-H Parquet): TPC-H SF 0.1 and 1 (batches of
0.1%, 1% and 10%) and the fixed changes at SF 3 (about 15 minutes, SF 3 seven of
them), the catalog load test (4 minutes), 50 freshness commits, and the crossover of
incremental and full refreshes (batches of 5% to 60% at SF 0.1, 3 minutes), the CLI
refresh from a fresh process (the demo, then 5 small changes, about 5 minutes), and the soak
(issue 19: ten views, two slow, a source committing every second, ``--soak-s`` 600 once the
views are built, about 15 minutes in all). ``--parts tpch,freshness`` leaves the other
results as they are; ``--parts soak --soak-s 90`` is a short trial of the soak.

Each part replaces its own entry in ``docs/benchmarks/results.json``; the document and its
plots are then regenerated from that file alone. ``--out DIR`` reads and writes
``DIR/benchmarks/results.json`` and ``DIR/benchmarks.md`` instead (a trial run, or a run on
another machine or cluster kept apart).

The TPC-H part times every incremental refresh once per engine of ``--engines`` (each its
own views, ``engine: <e>``). ``--master spark://host:7077`` runs it on a standalone cluster
whose workers see the benchmark folder (``BENCH_DIR``, default ``.bench``) at the same path;
``--driver-memory`` sets the driver's JVM heap (the first session of the process).
``--cluster 2x1x8g`` starts such a cluster here for the run (a master and 2 workers of 1 core
and 8 GiB each, separate JVMs from the pyspark install, as the tests' cluster but seeing the
driver's files) and stops it at the end.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.benchmarks import common
from tests.benchmarks.common import load_average, machine, save_part

PARTS = ("tpch", "catalog", "freshness", "cli", "crossover", "soak")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


ENGINE_SETTINGS = ("auto", "spark", "local")


def _engines(text: str) -> tuple[str, ...]:
    engines = tuple(dict.fromkeys(e.strip() for e in text.split(",") if e.strip()))
    wrong = [e for e in engines if e not in ENGINE_SETTINGS]
    if wrong or not engines:
        raise argparse.ArgumentTypeError(
            f"engines: a comma-separated subset of {', '.join(ENGINE_SETTINGS)}, not {text!r}")
    return engines


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--spark-conf takes KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks", description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated subset of " + ", ".join(PARTS))
    parser.add_argument("--scale-factors", default="0.1,1,3",
                        help="TPC-H scale factors for the fixed-change scaling curve")
    parser.add_argument("--batch-scale-factors", default="0.1,1",
                        help="scale factors that also run the 0.1%%/1%%/10%% batches")
    parser.add_argument("--fractions", default="0.001,0.01,0.1", help="batch sizes")
    parser.add_argument("--large-fraction-below", type=float, default=10.0,
                        help="batch sizes of 10%% and more only below this scale factor")
    parser.add_argument("--delete-fractions", default="0.001,0.01,0.1",
                        help="batch sizes that also run RF2 (merge-on-read deletes)")
    parser.add_argument("--delete-scaling-below", type=float, default=10.0,
                        help="from this scale factor on, RF2 only at the first delete fraction "
                             "and no fixed-delete scaling run")
    parser.add_argument("--cow-delete-below", type=float, default=1.0,
                        help="below this scale factor, the scaling run adds one copy-on-write "
                             "fixed delete, for contrast")
    parser.add_argument("--repeats", type=int, default=5,
                        help="fixed-change repetitions (each kind; the report takes the median)")
    parser.add_argument("--batch-repeats", type=int, default=3,
                        help="batches of the smallest size, per kind (the median is reported)")
    parser.add_argument("--commits", type=int, default=50, help="freshness: source commits")
    parser.add_argument("--cli-repeats", type=int, default=5,
                        help="cli: small changes, each followed by a refresh of every demo view")
    parser.add_argument("--soak-s", type=float, default=600.0,
                        help="soak: seconds of soak once every view is built (the first "
                             "--soak-warmup-s of them not measured)")
    parser.add_argument("--soak-warmup-s", type=float, default=60.0,
                        help="soak: warm-up seconds, not measured")
    parser.add_argument("--soak-every", default="on_change",
                        help="soak: the fast views' `every` (on_change, a duration, or "
                             "'target': none, the target lag sets the cadence)")
    parser.add_argument("--soak-workers", type=int, default=4,
                        help="soak: `workers:` of the config, when the pipeline has the key "
                             "(0: not written)")
    parser.add_argument("--crossover-scale-factor", type=float, default=0.1,
                        help="crossover: the TPC-H scale factor")
    parser.add_argument("--crossover-fractions", default="0.05,0.1,0.2,0.3,0.45,0.6",
                        help="crossover: batch sizes, as fractions of the orders")
    parser.add_argument("--engines", type=_engines, default=("auto", "spark"),
                        help="TPC-H: the engines whose incremental views are timed side by "
                             "side, comma-separated (auto, spark, local)")
    parser.add_argument("--master", default=None,
                        help="TPC-H: spark.master (e.g. spark://host:7077); default: the "
                             "pipeline's own (local[2])")
    parser.add_argument("--cluster", type=_cluster, default=None, metavar="WxCxMEM",
                        help="TPC-H: start a standalone cluster of W workers of C cores and MEM "
                             "memory each (e.g. 2x1x8g) for the run; replaces --master")
    parser.add_argument("--driver-memory", default="8g",
                        help="TPC-H: spark.driver.memory (e.g. 2g)")
    parser.add_argument("--spark-conf", type=_conf, action="append", default=[],
                        metavar="KEY=VALUE",
                        help="TPC-H: one more spark.conf property (repeatable), e.g. "
                             "spark.executor.memory=4g")
    parser.add_argument("--out", type=Path, default=None,
                        help="read and write OUT/benchmarks/results.json and OUT/benchmarks.md "
                             "(default: docs)")
    parser.add_argument("--report-only", action="store_true",
                        help="only regenerate docs/benchmarks.md from results.json")
    args = parser.parse_args()
    with _cluster_of(args):
        _main(args)


def _main(args: argparse.Namespace) -> None:
    if args.out is not None:
        common.use_output(args.out)
    if not args.report_only:
        parts = [p for p in args.parts.split(",") if p]
        for part in parts:
            started, load = time.time(), load_average()
            print(f"== {part} (load {load})", flush=True)
            data = _run(part, args)
            data["_meta"] = {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
                             "wall_s": round(time.time() - started, 1), "load_before": load,
                             "load_after": load_average(), "machine": machine()}
            save_part(part, data)
    from tests.benchmarks.report import write_report

    print(f"wrote {write_report()}")


def _cluster(text: str) -> tuple[int, int, str]:
    workers, cores, memory = text.split("x")
    return int(workers), int(cores), memory


@contextmanager
def _cluster_of(args: argparse.Namespace) -> Iterator[None]:
    """Start the ``--cluster`` asked for (its master becomes ``args.master``), stop it after."""
    if args.cluster is None or args.report_only or "tpch" not in args.parts.split(","):
        yield
        return
    from tests.benchmarks.common import WORK
    from tests.conftest_spark_cluster import start_cluster

    workers, cores, memory = args.cluster
    root = WORK / "cluster"
    shutil.rmtree(root, ignore_errors=True)
    handle = start_cluster(root, hidden=(), workers=workers, cores=cores, memory=memory)
    args.master = handle.master_url
    print(f"cluster: {handle.master_url}, {workers} workers of {cores} cores, {memory}",
          flush=True)
    try:
        yield
    finally:
        handle.stop()


def _run(part: str, args: argparse.Namespace) -> dict:
    if part == "tpch":
        from tests.benchmarks import tpch_refresh

        return tpch_refresh.run(_floats(args.scale_factors), _floats(args.batch_scale_factors),
                                args.repeats, tuple(_floats(args.fractions)),
                                tuple(_floats(args.delete_fractions)), args.delete_scaling_below,
                                large_fraction_below=args.large_fraction_below,
                                cow_delete_below=args.cow_delete_below,
                                batch_repeats=args.batch_repeats, engines=args.engines,
                                spark=tpch_refresh.SparkSetup(args.master, args.driver_memory,
                                                              dict(args.spark_conf)))
    if part == "catalog":
        from tests.benchmarks import catalog_load

        return catalog_load.run()
    if part == "freshness":
        from tests.benchmarks import freshness

        return freshness.run(args.commits)
    if part == "cli":
        from tests.benchmarks import cli_refresh

        return cli_refresh.run(args.cli_repeats)
    if part == "crossover":
        from tests.benchmarks import crossover

        return crossover.run(args.crossover_scale_factor, tuple(_floats(args.crossover_fractions)))
    if part == "soak":
        from tests.benchmarks import soak

        return soak.run(args.soak_s, args.soak_warmup_s,
                        None if args.soak_every == "target" else args.soak_every,
                        args.soak_workers)
    raise SystemExit(f"unknown part {part!r}; expected one of {PARTS}")


if __name__ == "__main__":
    main()
