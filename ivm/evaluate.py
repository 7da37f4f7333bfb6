"""Evaluate a view plan on Spark: the view's delta, or a full recompute."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StructField, StructType
from sqlglot import exp

from ivm.compiler import block_tables
from ivm.errors import IvmError, NotIncrementalError
from ivm.plan import ViewPlan
from ivm.rewrite import affected_groups, affected_keys_term, delta_term, union_all
from ivm.zset import WEIGHT, consolidate

Relation = Callable[[str, str], str]
"""``relation(role, source)``: the temporary view holding one source's role."""

_IDENTIFIER = re.compile(r"\W")


@dataclass(frozen=True)
class SourceInput:
    """What the evaluator reads of one source for one tick.

    Attributes:
        new: The source's rows at the new frontier.
        old: The source's rows at the old frontier; None when the view has not read
            the source before (the old snapshot is empty).
        delta: The change feed from old to new as a Z-set (source columns plus
            ``_weight`` int64); None when the source did not advance.
    """

    new: DataFrame
    old: DataFrame | None = None
    delta: DataFrame | None = None


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
    if not plan.incremental:
        raise NotIncrementalError(plan.reason or "", view=plan.view, fragment=plan.root.detail)
    with _relations(plan, inputs) as relation:
        changed = [i for i, t in enumerate(block_tables(plan.query))
                   if inputs[t.name].delta is not None]
        spark = _session(inputs)
        if not changed:
            return _empty_delta(spark, plan, relation)
        if plan.is_aggregate:
            return consolidate(_aggregate_delta(spark, plan, changed, relation))
        terms = [delta_term(plan.query, i, relation) for i in changed]
        return consolidate(_run(spark, union_all(terms)))


def recompute(plan: ViewPlan, inputs: Mapping[str, SourceInput]) -> DataFrame:
    """Compute the whole view from the sources' new snapshots.

    Returns:
        The view's rows (its output columns, duplicates kept).
    """
    with _relations(plan, inputs) as relation:
        query = plan.query.copy()
        ctes = {cte.alias for cte in query.find_all(exp.CTE)}
        for table in query.find_all(exp.Table):
            if table.name in inputs and table.name not in ctes:
                table.set("this", exp.to_identifier(relation("new", table.name)))
                table.set("db", None)
                table.set("catalog", None)
        return _run(_session(inputs), query)


def _aggregate_delta(
    spark: SparkSession, plan: ViewPlan, changed: list[int], relation: Relation
) -> DataFrame:
    keys_name = relation("keys", "affected")
    if plan.query.args.get("group") is None and plan.query.args.get("distinct") is None:
        keys = None
    else:
        keys_query = union_all([affected_keys_term(plan.query, i, relation) for i in changed])
        spark.sql(keys_query.sql("spark")).createOrReplaceTempView(keys_name)
        keys = keys_name
    sides = [affected_groups(plan.query, "new", keys, 1, relation),
             affected_groups(plan.query, "old", keys, -1, relation)]
    return _run(spark, union_all(sides))


def _empty_delta(spark: SparkSession, plan: ViewPlan, relation: Relation) -> DataFrame:
    """An empty Z-set with the view's output columns (analysed, never executed)."""
    schema = recompute_schema(spark, plan, relation)
    return spark.createDataFrame([], StructType([*schema.fields, StructField(WEIGHT, LongType())]))


def recompute_schema(spark: SparkSession, plan: ViewPlan, relation: Relation) -> StructType:
    """The Spark schema of the view's output, from analysing its query."""
    query = plan.query.copy()
    for table in block_tables(query):
        table.set("this", exp.to_identifier(relation("new", table.name)))
        table.set("db", None)
    return spark.sql(query.sql("spark")).schema


def _run(spark: SparkSession, query: exp.Query) -> DataFrame:
    """Run ``query``; the result stays valid after the evaluator drops its temp views.

    A frame from ``spark.sql`` keeps its unresolved plan, which names the temp views, and
    ``DataFrameWriterV2`` re-analyses that plan. Selecting from the frame pins the
    analysed plan instead.
    """
    return spark.sql(query.sql("spark")).select("*")


def _session(inputs: Mapping[str, SourceInput]) -> SparkSession:
    first = next(iter(inputs.values()))
    return first.new.sparkSession


@contextmanager
def _relations(plan: ViewPlan, inputs: Mapping[str, SourceInput]) -> Iterator[Relation]:
    missing = [s for s in plan.sources if s not in inputs]
    if missing:
        raise IvmError(f"no input for sources {missing}", view=plan.view)
    spark = _session(inputs)
    prefix = "__ivm_" + _IDENTIFIER.sub('_', plan.view)
    registered: list[str] = []

    def relation(role: str, source: str) -> str:
        return f"{prefix}_{role}_{_IDENTIFIER.sub('_', source)}"

    for source in plan.sources:
        state = inputs[source]
        frames = {"new": state.new, "old": state.old if state.old is not None else
                  state.new.limit(0), "delta": state.delta}
        for role, frame in frames.items():
            if frame is not None:
                frame.createOrReplaceTempView(relation(role, source))
                registered.append(relation(role, source))
    try:
        yield relation
    finally:
        for name in registered + [relation("keys", "affected")]:
            spark.catalog.dropTempView(name)
