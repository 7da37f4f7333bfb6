"""Run a fuzz case: after the initial load and every tick, the view equals a full recompute.

The view is kept as a multiset: the initial load's rows (:func:`ivm.reload`), then each
tick's delta added (:func:`ivm.maintain`, the aggregate state carried from tick to tick).
The oracle is :func:`ivm.recompute`, which runs the SQL as written over the new snapshots.
The first half of the ticks hands the change feeds over in Arrow and lets the sources be
read on the driver, so the local engine takes them where the plan allows, advancing a state
held on the driver; the second half runs on Spark, with the state rebuilt there once and
then advanced. Doubles
compare to 9 significant digits (Spark's own aggregates of doubles depend on row order),
NaN equal to NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise

from pyspark.sql import SparkSession

from ivm import (
    DRIVER_STATE_MAX_ROWS,
    AggregateState,
    SourceInput,
    TopKState,
    ViewPlan,
    compile_view,
    maintain,
    recompute,
    reload,
)
from lakehouse.spark.arrow import to_arrow
from tests.conftest import arrow_reader
from tests.fuzz.cases import Case, Snapshot
from tests.fuzz.schema import KEYS, SCHEMAS, ddl
from tests.spark_frames import spark_frame

__all__ = ["Outcome", "run_case"]


@dataclass
class Outcome:
    """What running a case showed.

    Attributes:
        incremental: Whether the view compiled to an incremental plan (else nothing ran).
        reason: Why not, when it is not.
        ticks: Ticks checked against a recompute.
        engines: The engines the ticks ran on.
        failure: The first disagreement or error, or None.
    """

    incremental: bool
    reason: str | None = None
    ticks: int = 0
    engines: set[str] = field(default_factory=set)
    failure: str | None = None


def run_case(spark: SparkSession, case: Case) -> Outcome:
    """Compile the case's view and check every tick against a recompute.

    Raises:
        Exception: Spark cannot run the SQL as written (a fault of the generator, not of
            the maintenance).
    """
    plan = compile_view("fuzz", case.sql, SCHEMAS,
                        source_keys={t: k for t, k in KEYS.items() if t in SCHEMAS})
    if not plan.incremental:
        return Outcome(False, plan.reason)
    if plan.top_k is not None:  # the smallest buffer: bounds, trims and refills at every tick
        plan = replace(plan, top_k=replace(plan.top_k, buffer_rows=plan.top_k.limit + 1))
    outcome = Outcome(True)
    first = _inputs(spark, plan, case.snapshots[0], None, local=False)
    expected = _multiset(recompute(plan, first).collect())  # raises on a generator fault
    try:
        loaded = reload(plan, first)
        view = _multiset(loaded.rows.collect())
    except Exception as error:  # noqa: BLE001 - any error is the finding
        outcome.failure = f"initial load: {_first_line(error)}"
        return outcome
    if view != expected:
        outcome.failure = f"initial load: {_difference(view, expected)}"
        return outcome
    state = loaded.state
    ticks = len(case.snapshots) - 1
    for tick, (old, new) in enumerate(pairwise(case.snapshots), start=1):
        local = tick <= (ticks + 1) // 2
        failure, state = _tick(spark, plan, old, new, view, state, local, outcome)
        if failure is not None:
            outcome.failure = f"tick {tick}: {failure}"
            return outcome
    return outcome


def _tick(spark: SparkSession, plan: ViewPlan, old: Snapshot, new: Snapshot,
          view: Counter[tuple[object, ...]], state: AggregateState | TopKState | None,
          local: bool, outcome: Outcome) -> tuple[str | None, AggregateState | TopKState | None]:
    """One tick: ``view`` advanced by its delta in place; the disagreement, if any."""
    inputs = _inputs(spark, plan, new, old, local)
    if not local and isinstance(state, AggregateState) and state.table is not None:
        state = None  # engine spark reads no state held on the driver: it is rebuilt
    try:
        maintained = maintain(plan, inputs, state,
                              driver_state_max_rows=DRIVER_STATE_MAX_ROWS if local else 0,
                              local=local)
        delta = maintained.rows.collect()
    except Exception as error:  # noqa: BLE001 - any error is the finding
        return f"{type(error).__name__}: {_first_line(error)}", None
    outcome.engines.add(maintained.engine)
    for row in delta:
        view[_normal(tuple(row)[:-1])] += row["_weight"]
    if any(weight < 0 for weight in view.values()):
        return f"a row's weight went negative: {dict(-view)}", None
    expected = _multiset(recompute(plan, inputs).collect())
    outcome.ticks += 1
    if +view != expected:
        return f"{maintained.engine} engine: {_difference(+view, expected)}", None
    view.clear()
    view.update(expected)
    return None, maintained.state


def _inputs(spark: SparkSession, plan: ViewPlan, new: Snapshot, old: Snapshot | None,
            local: bool) -> dict[str, SourceInput]:
    inputs = {}
    for table in plan.sources:
        schema = ddl(table)
        at_new = spark_frame(spark, new[table], schema)
        if old is None:
            inputs[table] = SourceInput(at_new)
            continue
        at_old = spark_frame(spark, old[table], schema)
        change = Counter(new[table])
        change.subtract(Counter(old[table]))
        rows = [(*row, weight) for row, weight in change.items() if weight]
        delta = spark_frame(spark, rows, f"{schema}, _weight bigint") if rows else None
        arrow = delta is not None and local
        inputs[table] = SourceInput(
            at_new, at_old, delta, to_arrow(delta) if arrow and delta is not None else None,
            arrow_reader(to_arrow(at_new), to_arrow(at_old)) if local else None)
    return inputs


def _normal(row: Iterable[object]) -> tuple[object, ...]:
    """A row with doubles to 9 significant digits, NaN as ``"NaN"`` and -0.0 as 0.0."""
    return tuple(("NaN" if math.isnan(v) else float(f"{v:.9g}") + 0.0)
                 if isinstance(v, float) else v for v in row)


def _multiset(rows: Iterable[Iterable[object]]) -> Counter[tuple[object, ...]]:
    return Counter(_normal(row) for row in rows)


def _difference(view: Mapping[tuple[object, ...], int],
                expected: Mapping[tuple[object, ...], int]) -> str:
    extra, missing = Counter(view), Counter(expected)
    extra.subtract(expected)
    missing.subtract(view)
    return f"rows too many {dict(+extra)}, rows missing {dict(+missing)}"


def _first_line(error: Exception) -> str:
    text = str(error)
    return text.splitlines()[0][:300] if text else type(error).__name__
