"""Evaluate a view plan: the view's delta at a tick, or a full recompute.

The plan's tree runs on Spark by :mod:`ivm.execute`, node by node; the local engine takes
a tick the plan and its sizes allow (:mod:`ivm.engine_rule`); an aggregate maintained by
the invertible law advances its state on the engine that holds it
(:mod:`ivm.aggregate_state`).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cached_property

import pyarrow as pa
from cachetools import LRUCache
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType
from sqlglot import exp

from ivm import driver_output, execute, local_rules
from ivm.aggregate_form import (
    ARG_PREFIX,
    GROUP_PREFIX,
    AggregateForm,
    aggregate_form,
    decimal_parts,
    exact_type,
    state_output,
)
from ivm.aggregate_state import AggregateState, advance, engine_of, settled_checked
from ivm.driver_delta import DRIVER_READ_MAX_ROWS, EMPTY, ArrowRead
from ivm.engine_rule import Engine, local_refusal
from ivm.errors import IvmError, NotIncrementalError, SumOverflowError
from ivm.laws import Law
from ivm.local_rules import LOCAL
from ivm.plan import PlanNode, TopKPlan, ViewPlan
from ivm.rewrite import at_role
from ivm.scope import Scope, frame_of, identifier
from ivm.spark_arrow import to_arrow
from ivm.state_local import DRIVER_DELTA_MAX_ROWS, DRIVER_STATE_MAX_ROWS
from ivm.state_spark import SPARK_STATE_ENGINE, build
from ivm.top_k_state import TopKState, fill, order, view_rows
from ivm.top_k_state import advance as advance_top_k
from ivm.zset import WEIGHT, consolidate, with_weight


@dataclass(frozen=True)
class SourceInput:
    """What the evaluator reads of one source for one tick.

    Attributes:
        new: The source's rows at the new frontier, or a function that returns them,
            called only if a Spark query reads them (a tick evaluated on the driver
            does not).
        old: The source's rows at the old frontier (or a function, as ``new``); None
            when the view has not read the source before (the old snapshot is empty).
        delta: The change feed from old to new as a Z-set (source columns plus
            ``_weight`` int64), or a function that returns it, called only if a Spark
            query reads the change; None when the source did not advance.
        delta_arrow: The same change feed as an Arrow table, when the caller has it:
            the change's join keys are then read from it, without a Spark job, and a
            tick evaluated on the driver reads nothing else of the change.
        read_arrow: Reads the source's rows at ``new`` or ``old`` on the driver,
            restricted to join keys (:data:`ivm.driver_delta.ArrowRead`), when the caller
            can: a small change to a join view is then evaluated there, without Spark.
        schema_key: A value equal at two ticks exactly when the source's schema at
            ``new`` is the same (for an Iceberg table: its uuid and the snapshot's
            schema id), when the caller knows one: the view's schema analysed at an
            earlier tick is then reused without resolving ``new``. None: ``new``'s
            Spark schema is the key.
    """

    new: DataFrame | Callable[[], DataFrame]
    old: DataFrame | Callable[[], DataFrame] | None = None
    delta: DataFrame | Callable[[], DataFrame] | None = None
    delta_arrow: pa.Table | None = None
    read_arrow: ArrowRead | None = None
    schema_key: Hashable | None = None

    def frame(self) -> DataFrame:
        """The source's rows at the new frontier (``new``, called if a function)."""
        return frame_of(self.new)

    def __post_init__(self) -> None:
        if callable(self.delta) and not isinstance(self.delta, DataFrame) \
                and self.delta_arrow is None:
            raise IvmError("a change feed given as a function needs its Arrow table too")


@dataclass(frozen=True)
class Maintained:
    """The result of a tick, and the state to keep for the next one.

    The rows are a Spark DataFrame (``frame``) or, when the aggregate state is held on
    the driver, an Arrow table computed there (``arrow``); :attr:`rows` and
    :meth:`to_arrow` give either as the other.

    Attributes:
        frame: The rows on Spark, or None when they are in ``arrow``.
        state: The state at the new frontier: an aggregate state for a view maintained
            by the invertible-aggregate law, a buffer for one by the top-K law (None for
            other views).
        arrow: The rows on the driver, or None when they are in ``frame``.
        schema: The Spark schema of ``arrow``'s rows (None: the one of their Arrow types,
            a timestamp without a time zone as ``timestamp_ntz``).
        engine: ``local`` when the tick ran no Spark job (the local engine computed the
            block's delta, the driver-held state gave the view's rows), else ``spark``.
        engine_reason: Why that engine: the sizes for ``local``, what the local engine
            could not take for ``spark``.
    """

    frame: DataFrame | None = None
    state: AggregateState | TopKState | None = None
    arrow: pa.Table | None = None
    schema: StructType | None = None
    engine: Engine = "spark"
    engine_reason: str = ""

    @cached_property
    def rows(self) -> DataFrame:
        """The rows as a Spark DataFrame (built from ``arrow`` when computed on the driver).

        From :func:`maintain`, the view's delta (a consolidated Z-set: output columns plus
        ``_weight``); from :func:`reload`, the view's rows (duplicates kept).
        """
        if self.frame is not None:
            return self.frame
        assert self.arrow is not None
        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        schema = self.schema or from_arrow_schema(self.arrow.schema, prefer_timestamp_ntz=True)
        return spark.createDataFrame(self.arrow.to_pylist(), schema)

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table (collected from Spark unless computed on the driver)."""
        return self.arrow if self.arrow is not None else to_arrow(self.rows)


def view_delta(plan: ViewPlan, inputs: Mapping[str, SourceInput]) -> DataFrame:
    """Compute the change of the view between the old and the new frontier.

    Args:
        plan: The compiled view.
        inputs: One entry per source of the view.

    Returns:
        A consolidated Z-set: the view's output columns plus ``_weight`` (int64).

    Raises:
        NotIncrementalError: The plan is not incremental (use :func:`recompute`).
        IvmError: An input is missing.
    """
    return maintain(plan, inputs).rows


def maintain(
    plan: ViewPlan, inputs: Mapping[str, SourceInput],
    state: AggregateState | TopKState | None = None,
    driver_state_max_rows: int = DRIVER_STATE_MAX_ROWS,
    driver_read_max_rows: int = DRIVER_READ_MAX_ROWS,
    local: bool = True,
) -> Maintained:
    """Compute the view's delta, reading and advancing its aggregate state.

    Args:
        plan: The compiled view.
        inputs: One entry per source of the view.
        state: The aggregate state at the old frontier (from the previous tick's
            :class:`Maintained`), or None: a view maintained by the invertible-aggregate
            law then builds it from the sources' old snapshots (one full aggregation).
        driver_state_max_rows: A state built here is held on the driver up to this many
            groups, when the view's outputs allow it (:mod:`ivm.driver_output`); 0 keeps
            it on Spark. A state held on the driver that outgrows it is dropped (the
            next tick builds it again).
        driver_read_max_rows: Most rows a join partner read on the driver may scan in
            one table (:func:`ivm.driver_delta.block_delta`); a larger read runs on Spark.
        local: Whether the local engine may compute the delta; False (engine ``spark``)
            runs it on Spark even where a change feed came in Arrow.

    Returns:
        The delta (a consolidated Z-set) and the state at the new frontier.

    Raises:
        NotIncrementalError: The plan is not incremental (use :func:`recompute`).
        IvmError: An input is missing.
    """
    if not plan.incremental:
        raise NotIncrementalError(plan.reason or "", view=plan.view, fragment=plan.root.detail)
    if plan.top_k is not None:
        if plan.root.law is not Law.TOP_K:
            raise IvmError(f"a top-K plan whose root is maintained by the {plan.root.law} law",
                           view=plan.view, fragment=plan.root.detail)
        return _maintain_top_k(plan.top_k, inputs, state, driver_state_max_rows,
                               driver_read_max_rows, local)
    if isinstance(state, TopKState):
        raise IvmError("a top-K buffer given for a view not maintained by the top-K law",
                       view=plan.view)
    with _scope(plan, inputs, driver_read_max_rows) as scope:
        if not scope.changed:
            empty = with_weight(scope.run(at_role(plan.query, "new", scope.relation)).limit(0))
            return Maintained(empty, _unchanged(state), engine_reason="no source changed")
        form = _invertible(plan)
        if form is None:
            return _recomputed_groups(scope, plan, local)
        try:
            return _maintain_invertible(scope, plan, inputs, form, state, driver_state_max_rows)
        except SumOverflowError as error:
            return _recomputed_groups(scope, plan, local, f"{error}: the groups are recomputed")


def _maintain_invertible(scope: Scope, plan: ViewPlan, inputs: Mapping[str, SourceInput],
                         form: AggregateForm, state: AggregateState | None,
                         driver_state_max_rows: int) -> Maintained:
    """A tick by the invertible-aggregate law: the state advanced by the input's delta.

    Raises:
        SumOverflowError: A group's decimal sum overflows its type (built or advanced).
    """
    state = state or _build(scope, form, "old", driver_state_max_rows)
    if state is None:
        return Maintained(consolidate(execute.delta(scope, plan.root)),
                          engine_reason=_spark_reason(plan, state))
    reason = _spark_reason(plan, state)
    input_rows = execute.input_rows(plan.root, form.rows())
    if state.table is not None:
        schema = state.schema or _view_schema(scope, plan, inputs)
        on_driver = _advance_on_driver(scope, form, input_rows, state, schema,
                                       driver_state_max_rows)
        if isinstance(on_driver, Maintained):
            return on_driver
        reason, state = on_driver, _build(scope, form, "old", 0)  # the state moves to Spark
        assert state is not None, "its arguments were typed exact when it was built"
    schema = _as_written(scope, plan).schema
    engine = engine_of(state.held)
    change = engine.partial(form, execute.delta(scope, input_rows), state.arg_types)
    advanced = advance(engine, form, state.arg_types, state.held, change)
    assert not isinstance(advanced, str), "Spark adds sums as Spark does"
    sides = [with_weight(_output(scope, form, state.arg_types, rows, schema), weight)
             for rows, weight in ((advanced.after, 1), (advanced.before, -1))]
    return Maintained(consolidate(sides[0].union(sides[1])),
                      AggregateState(state.arg_types, rows=advanced.state, change=advanced.change),
                      engine_reason=reason)


def _recomputed_groups(scope: Scope, plan: ViewPlan, local: bool, why: str = "") -> Maintained:
    """A tick by affected-key recompute, on the local engine where it can run it.

    The local engine (:func:`_block_on_driver`) when ``local`` allows and it takes the
    block, else Spark; ``why`` leads the engine's reason.
    """
    block = _block_on_driver(scope, plan) if local else "engine: spark"
    if isinstance(block, Maintained):
        return replace(block, engine_reason="; ".join(filter(None, [why, block.engine_reason])))
    return Maintained(consolidate(execute.delta(scope, plan.root)),
                      engine_reason="; ".join(filter(None, [why, block])))


def _maintain_top_k(top: TopKPlan, inputs: Mapping[str, SourceInput],
                    state: AggregateState | TopKState | None, state_max_rows: int,
                    read_max_rows: int, local: bool) -> Maintained:
    """A tick of an ``ORDER BY ... LIMIT`` view by the top-K law (:mod:`ivm.top_k_state`).

    The inner query's delta comes from its own plan (on either engine); the buffer is
    advanced on Spark. Without a buffer (a new process), it is filled from the inner
    query at the old frontier first (a full scan).
    """
    kept = state if isinstance(state, TopKState) else None
    if kept is not None and all(inputs[s].delta is None for s in top.inner.sources):
        unchanged = with_weight(kept.buffer.select(*top.outputs).limit(0))
        return Maintained(unchanged, kept, engine_reason="no source changed")
    inner = maintain(top.inner, inputs, kept.inner if kept is not None else None,
                     state_max_rows, read_max_rows, local)
    with _scope(top.inner, inputs, read_max_rows) as scope:
        def rows(role: str) -> DataFrame:
            return scope.run(at_role(top.inner.original, role, scope.relation))
        if kept is None:
            kept = fill(top, rows("old"))
        advanced = advance_top_k(top, kept, inner.rows, lambda: rows("new"))
    reason = "the top-K law runs on Spark" + (
        " (the buffer ran short: refilled from the sources)" if advanced.refilled else "")
    inner_state = inner.state if isinstance(inner.state, AggregateState) else None
    return Maintained(advanced.delta, replace(advanced.state, inner=inner_state),
                      engine_reason=reason)


def _block_on_driver(scope: Scope, plan: ViewPlan) -> Maintained | str:
    """The view's delta on the local engine: its plan run by the local rules.

    A block of filters, projections and inner joins: its delta terms run on DuckDB over
    the change feeds' Arrow tables and the partners read on the driver. A grouping
    maintained by affected-key recompute: the affected groups are recomputed from rows
    read on the driver (:mod:`ivm.local_rules`). Either delta is then consolidated.

    Returns:
        The view's delta in Arrow: its columns (as the local engine types them, Spark's
        types; NULL-typed when nothing changed) plus ``_weight``; or why Spark computes
        it: the plan (:func:`ivm.local_rules.shape_refusal`, then the rules' own
        refusal of a block's expressions), a change feed not in Arrow or
        larger than ``DRIVER_DELTA_MAX_ROWS``, or what could not run locally.

    Raises:
        IvmError: A node's law is not one its place in the plan allows.
    """
    refused = local_rules.shape_refusal(plan.root)  # the rules check the rest as they run
    if refused is not None:
        return refused
    change_rows = _local_change_rows(scope)
    if isinstance(change_rows, str):
        return change_rows
    rows = execute.run(scope, plan.root, LOCAL)
    if isinstance(rows, str):
        return rows
    how = "; its groups recomputed from the driver" if plan.root.operator == "aggregate" else ""
    names = [*plan.columns, WEIGHT]
    delta = (pa.table({name: pa.array([], pa.int64() if name == WEIGHT else pa.null())
                       for name in names}) if rows is EMPTY else rows.rename_columns(names))
    return Maintained(arrow=consolidate(delta), engine="local",
                      engine_reason=f"a change of {change_rows:,} rows{how}")


def _local_change_rows(scope: Scope) -> int | str:
    """The rows of the tick's change feeds, when the local engine may read them all.

    Returns:
        Their number; or why not: a change feed not in Arrow, or more rows than
        ``DRIVER_DELTA_MAX_ROWS``.
    """
    changed = [scope.arrows.get(source) for source in scope.changed]
    if any(change is None for change in changed):
        return "a change feed not in Arrow"
    rows = sum(change.num_rows for change in changed if change is not None)
    if rows > DRIVER_DELTA_MAX_ROWS:
        return f"a change of {rows:,} rows (local: {DRIVER_DELTA_MAX_ROWS:,} at most)"
    return rows


def _unchanged(state: AggregateState | None) -> AggregateState | None:
    """``state`` as the state after a tick that changed nothing: its change has no row."""
    if state is None:
        return None
    if state.table is not None:
        return replace(state, change=state.table.slice(0, 0))
    assert state.rows is not None
    return replace(state, change=state.rows.limit(0))


def _spark_reason(plan: ViewPlan, state: AggregateState | None) -> str:
    """Why a tick whose aggregate state (if any) is not on the driver runs on Spark."""
    refused = local_refusal(plan)
    if refused is not None:
        return refused
    if state is None:
        return "an argument Spark types as inexact: the aggregate falls back to recompute"
    return "the aggregate state is on Spark (more groups than the driver keeps, or kept there)"


def reload(plan: ViewPlan, inputs: Mapping[str, SourceInput],
           driver_state_max_rows: int = DRIVER_STATE_MAX_ROWS) -> Maintained:
    """Compute the whole view from the sources' new snapshots, and its aggregate state.

    Args:
        plan: The compiled view.
        inputs: One entry per source of the view.
        driver_state_max_rows: As for :func:`maintain`.

    Returns:
        The view's rows (duplicates kept) and, for a view maintained by the
        invertible-aggregate law, its state at the new frontier (none while a group's
        decimal sum overflows its type: :class:`ivm.errors.SumOverflowError`).
    """
    if plan.top_k is not None:
        top = plan.top_k
        inner = reload(top.inner, inputs, driver_state_max_rows)
        filled = fill(top, inner.rows)
        inner_state = inner.state if isinstance(inner.state, AggregateState) else None
        return Maintained(view_rows(top, filled.buffer),
                          TopKState(filled.buffer, filled.bound, inner_state))
    form = _invertible(plan)
    with _scope(plan, inputs) as scope:
        try:
            state = (_build(scope, form, "new", driver_state_max_rows)
                     if form is not None else None)
        except SumOverflowError:  # no state: the next tick recomputes the groups
            state = None
        if form is None or state is None:
            return Maintained(_as_written(scope, plan))
        schema = _as_written(scope, plan).schema
        if state.table is not None:
            outputs = driver_output.plain_outputs(form)
            assert outputs is not None
            rows = driver_output.view_rows(form, outputs, state.arg_types, state.table,
                                           _columns(schema))
            return Maintained(state=replace(state, schema=schema), arrow=rows, schema=schema)
        assert state.rows is not None
        return Maintained(_output(scope, form, state.arg_types, state.rows, schema), state)


def recompute(plan: ViewPlan, inputs: Mapping[str, SourceInput]) -> DataFrame:
    """Compute the whole view from the sources' new snapshots.

    An ``ORDER BY ... LIMIT K`` view takes its K rows by the total order of
    :mod:`ivm.top_k`, which breaks ties Spark leaves open.

    Returns:
        The view's rows (its output columns, duplicates kept).
    """
    if plan.top_k is not None:
        top = plan.top_k
        with _scope(top.inner, inputs) as scope:
            rows = scope.run(at_role(top.inner.original, "new", scope.relation))
        return rows.orderBy(*order(top)).limit(top.limit).select(*top.outputs)
    with _scope(plan, inputs) as scope:
        return _as_written(scope, plan)


@contextmanager
def _scope(plan: ViewPlan, inputs: Mapping[str, SourceInput],
           read_max_rows: int = DRIVER_READ_MAX_ROWS) -> Iterator[Scope]:
    missing = [s for s in plan.sources if s not in inputs]
    if missing:
        raise IvmError(f"no input for sources {missing}", view=plan.view)
    first = inputs[plan.sources[0]].new if plan.sources else None
    session = ((lambda: first.sparkSession) if isinstance(first, DataFrame)
               else SparkSession.active)
    changed = {s for s in plan.sources if inputs[s].delta is not None}
    arrows = {s: inputs[s].delta_arrow for s in changed if inputs[s].delta_arrow is not None}
    # temporary views named for this tick alone: ticks of several views run at once
    prefix = f"__ivm_{identifier(plan.view)}_{uuid.uuid4().hex[:8]}"
    scope = Scope(session, prefix, changed, arrows,
                   {s: inputs[s].read_arrow for s in plan.sources}, read_max_rows)
    for source in plan.sources:
        state = inputs[source]
        scope.defer(state.new, "new", source)
        scope.defer(state.old if state.old is not None else _no_rows(state.new), "old", source)
        if state.delta is not None:
            scope.defer(state.delta, "delta", source)
    try:
        yield scope
    finally:
        for name in scope.registered:
            scope.spark.catalog.dropTempView(name)


def _no_rows(rows: DataFrame | Callable[[], DataFrame]) -> Callable[[], DataFrame]:
    return lambda: frame_of(rows).limit(0)


def _invertible(plan: ViewPlan) -> AggregateForm | None:
    """The view's aggregate form when its top node is maintained by the invertible law."""
    root = plan.root
    if root.law != Law.INVERTIBLE_AGGREGATE or root.query is None:
        return None
    return aggregate_form(root.query)


def _build(scope: Scope, form: AggregateForm, role: str, driver_max_rows: int
           ) -> AggregateState | None:
    """The aggregate state at ``role`` (a full aggregation of the block's input rows).

    Held on the driver when the view's outputs are plain reads of it, its groups compare
    exactly in Arrow and it has at most ``driver_max_rows`` groups; else on Spark. None
    when Spark types an argument of SUM or AVG as inexact (floating point), which the
    compiler's types did not foresee: the view then falls back to affected-key recompute.
    """
    rows = scope.run(at_role(form.rows(), role, scope.relation))
    types = [rows.schema[f"{ARG_PREFIX}{j}"].dataType.simpleString() for j in range(len(form.args))]
    if not all(exact_type(t) for t, summed in zip(types, form.summed, strict=True) if summed):
        return None
    plain = driver_output.plain_outputs(form) is not None
    return build(form, rows, types, driver_max_rows if plain else 0)


def _advance_on_driver(scope: Scope, form: AggregateForm, rows: PlanNode,
                       state: AggregateState, schema: StructType, max_rows: int
                       ) -> Maintained | str:
    """A tick of a state held on the driver: at most one Spark query, the block's input delta.

    The block's input delta is evaluated by the local engine when it can be
    (:func:`_rows_on_driver`: no Spark job); else collected from Spark when the change feeds
    are in Arrow and at most ``DRIVER_DELTA_MAX_ROWS`` rows; otherwise Spark aggregates
    them first. Its partial aggregate and the state's advance run on the local engine
    (:class:`ivm.state_local.LocalStateEngine`).

    Returns:
        The view's delta in Arrow, and the new state (None once it has more than
        ``max_rows`` groups: the next tick builds it again, on Spark); or why the state
        must move to Spark: a sum overflows where DuckDB stops and Spark does not.
    """
    assert state.table is not None
    outputs = driver_output.plain_outputs(form)
    assert outputs is not None
    computed = _change_aggregate_on_driver(scope, form, rows, state)
    if isinstance(computed, str):
        return f"the aggregate state's sums, on Spark: {computed}"
    change, engine, reason = computed
    advanced = advance(engine_of(state.table), form, state.arg_types, state.table, change)
    if isinstance(advanced, str):
        return f"the aggregate state's sums, on Spark: {advanced}"
    rows = driver_output.delta_rows(form, outputs, state.arg_types, advanced.before,
                                    advanced.after, _columns(schema))
    kept = (AggregateState(state.arg_types, table=advanced.state, schema=schema,
                           change=advanced.change)
            if advanced.state.num_rows <= max_rows else None)
    weighted_schema = StructType([*schema.fields, StructField(WEIGHT, LongType(), False)])
    return Maintained(state=kept, arrow=rows, schema=weighted_schema, engine=engine,
                      engine_reason=reason)


def _change_aggregate_on_driver(scope: Scope, form: AggregateForm, rows: PlanNode,
                                state: AggregateState) -> tuple[pa.Table, Engine, str] | str:
    """The partial aggregate of the block's input delta, in Arrow, and the engine that ran it.

    The local engine computes the delta and aggregates it when it can; else Spark computes
    the delta, collected as rows when the change is small (the local engine aggregates
    them) or aggregated by Spark first.

    Returns:
        The partial aggregate, the engine of the delta and why; or why the state must move
        to Spark: a sum overflows where DuckDB stops (Spark's SUM would wrap a bigint, or
        make a decimal NULL).

    Raises:
        SumOverflowError: Spark aggregated the delta and a decimal sum overflowed.
    """
    assert state.table is not None
    change_rows = _local_change_rows(scope)
    if isinstance(change_rows, str):
        change = to_arrow(SPARK_STATE_ENGINE.partial(form, execute.delta(scope, rows),
                                                     state.arg_types))
        # summed by Spark: a sum past its type is NULL, and raises SumOverflowError here
        change = settled_checked(engine_of(change), form, state.arg_types, change)
        return change, "spark", change_rows
    local = _rows_on_driver(scope, rows, state)
    engine: Engine = "local"
    reason = (f"a change of {change_rows:,} rows; a state of {state.table.num_rows:,} groups "
              "on the driver")
    if isinstance(local, str):  # Spark evaluates the block; the change is small
        engine, reason, local = "spark", local, to_arrow(execute.delta(scope, rows))
    change = engine_of(local).partial(form, local, state.arg_types)
    return change if isinstance(change, str) else (change, engine, reason)


def _rows_on_driver(scope: Scope, rows: PlanNode, state: AggregateState) -> pa.Table | str:
    """The delta of the block's input rows on the local engine (:mod:`ivm.local_rules`).

    From the change feeds' Arrow tables and, for a join, the partners read on the driver.

    Returns:
        ``__g*`` typed as the state's groups, ``__a*`` as Spark types the arguments, and
        ``_weight``; or why Spark evaluates the block: a change feed is not in Arrow, a
        partner cannot be read there, or an expression is outside what
        :mod:`ivm.local_engine` computes exactly as Spark.

    Raises:
        IvmError: A node's law is not one its place in the plan allows.
    """
    if any(source not in scope.arrows for source in scope.changed):
        return "a change feed not in Arrow"
    delta = execute.run(scope, rows, LOCAL)
    if isinstance(delta, str):
        return delta
    assert isinstance(rows.query, exp.Select) and state.table is not None
    types = {f.name: f.type for f in state.table.schema if f.name.startswith(GROUP_PREFIX)}
    types |= {f"{ARG_PREFIX}{j}": arrow_type for j, t in enumerate(state.arg_types)
              if (arrow_type := _exact_arrow_type(t)) is not None}
    if delta is EMPTY:  # typed as the state; an argument only counted may stay untyped
        names = [*(s.alias_or_name for s in rows.query.selects), WEIGHT]
        return pa.table({n: pa.array([], types.get(n, pa.int64() if n == WEIGHT else pa.null()))
                         for n in names})
    try:
        return pa.table({name: delta[name].cast(types[name]) if name in types else delta[name]
                         for name in delta.column_names})
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # let Spark evaluate it
        return "a value outside the type Spark gives the aggregate's state"


def _exact_arrow_type(spark_type: str) -> pa.DataType | None:
    """The Arrow type of a Spark integer or decimal type (None for others)."""
    integers = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
                "bigint": pa.int64()}
    if spark_type in integers:
        return integers[spark_type]
    precision, scale = decimal_parts(spark_type)
    return pa.decimal128(precision, scale) if precision is not None else None


def _output(scope: Scope, form: AggregateForm, arg_types: Sequence[str],
            state_rows: DataFrame, schema: StructType) -> DataFrame:
    """The view's rows of some groups, from their state rows.

    Named and typed as ``schema``: the view's own, from :func:`_as_written`.
    """
    name = scope.register(state_rows, "state")
    rows = scope.run(state_output(form, arg_types, name)).toDF(*schema.names)
    types = [f.dataType for f in rows.schema.fields]
    if types == [f.dataType for f in schema.fields]:
        return rows
    return rows.select(*[F.col(f.name).cast(f.dataType) for f in schema.fields])


def _columns(schema: StructType) -> list[tuple[str, bool]]:
    """Name and nullability of each field: the view's columns, as Spark types them."""
    return [(f.name, f.nullable) for f in schema.fields]


_VIEW_SCHEMAS: LRUCache[tuple[str, tuple[str, ...]], StructType] = LRUCache(256)
_VIEW_SCHEMAS_LOCK = threading.Lock()  # ticks of several views run at once


def _view_schema(scope: Scope, plan: ViewPlan, inputs: Mapping[str, SourceInput]
                 ) -> StructType:
    """The schema of :func:`_as_written`, analysed once per SQL and source schemas.

    Spark's analysis costs tens of milliseconds, a tick on the driver not much more.
    A source's schema is known by its ``schema_key`` when it has one, which spares
    resolving its snapshot.
    """
    key = (plan.original_sql,
           tuple(_schema_key(inputs[source]) for source in plan.sources))
    with _VIEW_SCHEMAS_LOCK:
        schema = _VIEW_SCHEMAS.get(key)
    if schema is None:
        schema = _as_written(scope, plan).schema
        with _VIEW_SCHEMAS_LOCK:
            _VIEW_SCHEMAS[key] = schema
    return schema


def _schema_key(given: SourceInput) -> str:
    """What identifies a source's schema at the new frontier (see ``schema_key``)."""
    if given.schema_key is not None:
        return repr(given.schema_key)
    return given.frame().schema.json()


def _as_written(scope: Scope, plan: ViewPlan) -> DataFrame:
    """The view's SQL as the user wrote it, over the new snapshots, named as the plan."""
    return scope.run(at_role(plan.original, "new", scope.relation)).toDF(*plan.columns)
