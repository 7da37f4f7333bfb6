"""The plan's tree is what runs: each node's law, as ``lakehouse explain`` prints it, picks
the rule the evaluator applies to that node (:mod:`ivm.execute`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from ivm import (
    AggregateState,
    IvmError,
    Law,
    PlanNode,
    SourceInput,
    ViewPlan,
    compile_view,
    execute,
    maintain,
    recompute,
)
from ivm.local_rules import LOCAL
from ivm.scope import Scope, frame_of
from ivm.spark_arrow import to_arrow
from tests.conftest import arrow_reader, multiset, normal_row
from tests.spark_frames import spark_frame

pytestmark = pytest.mark.spark

SCHEMA = "carrier string, month int, fare bigint"
SCHEMAS = {"flights": {"carrier": "string", "month": "int", "fare": "bigint"},
           "airlines": {"carrier": "string", "name": "string"}}
OLD = [("AA", 1, 10), ("AA", 2, 20), ("UA", 1, 5), ("DL", 3, 7)]
NEW = [("AA", 1, 10), ("UA", 1, 5), ("UA", 2, 8), ("DL", 3, 7), ("DL", 4, 1)]


def _inputs(spark: SparkSession) -> dict[str, SourceInput]:
    """The flights changed from OLD to NEW; the airlines unchanged."""
    change = Counter(NEW)
    change.subtract(Counter(OLD))
    delta = spark_frame(spark, [(*row, w) for row, w in change.items() if w],
                        f"{SCHEMA}, _weight bigint")
    airlines = spark_frame(spark, [("AA", "American"), ("UA", "United")],
                           "carrier string, name string")
    return {"flights": SourceInput(spark_frame(spark, NEW, SCHEMA),
                                   spark_frame(spark, OLD, SCHEMA), delta),
            "airlines": SourceInput(airlines, airlines)}


def _with_root(plan: ViewPlan, root: PlanNode) -> ViewPlan:
    return replace(plan, root=root)


def _applied(spark: SparkSession, plan: ViewPlan, rows: DataFrame) -> Counter:
    """The view at the old frontier plus the tick's delta ``rows``."""
    old = {"flights": SourceInput(spark_frame(spark, OLD, SCHEMA))}
    view = multiset(recompute(plan, old).collect())
    for row in rows.collect():
        view[normal_row(tuple(row)[:-1])] += row["_weight"]
    return +view


def test_the_root_law_decides_how_an_aggregate_is_maintained(spark: SparkSession) -> None:
    """An invertible aggregate keeps a state; relabelled affected-key recompute, it keeps
    none and recomputes its groups. Both equal a full recompute."""
    plan = compile_view("v", "SELECT carrier, COUNT(*) AS n, SUM(fare) AS s FROM flights "
                        "GROUP BY carrier", SCHEMAS)
    assert plan.root.law is Law.INVERTIBLE_AGGREGATE
    recomputed = _with_root(plan, replace(plan.root, law=Law.AFFECTED_KEY_RECOMPUTE))
    inputs = _inputs(spark)
    expected = multiset(recompute(plan, inputs).collect())
    by_state = maintain(plan, inputs, driver_state_max_rows=0, local=False)
    by_groups = maintain(recomputed, inputs, driver_state_max_rows=0, local=False)
    assert isinstance(by_state.state, AggregateState)
    assert by_groups.state is None
    for maintained in (by_state, by_groups):
        assert _applied(spark, plan, maintained.rows) == expected


def test_a_set_operation_runs_by_its_node_law(spark: SparkSession,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A UNION ALL node runs by the linear law (its branches' deltas, no snapshot of the
    whole operation read); relabelled affected-key recompute (the rule of UNION), the same
    delta comes from the whole operation at both snapshots, restricted to affected rows."""
    plan = compile_view("v", "SELECT carrier, month FROM flights WHERE fare > 6 "
                        "UNION ALL SELECT carrier, 0 AS month FROM flights", SCHEMAS)
    assert (plan.root.operator, plan.root.law) == ("union all", Law.LINEAR)
    relabelled = _with_root(plan, replace(plan.root, law=Law.AFFECTED_KEY_RECOMPUTE))
    inputs = _inputs(spark)
    expected = multiset(recompute(plan, inputs).collect())
    ran = _queries_run(monkeypatch)
    for version in (plan, relabelled):
        ran.clear()
        rows = maintain(version, inputs, local=False).rows
        whole = [sql for sql in ran if "UNION ALL" in sql and "_delta_" not in sql]
        assert len(whole) == (2 if version is relabelled else 0), ran
        assert _applied(spark, plan, rows) == expected


def _queries_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the SQL of every query the evaluation runs on Spark (and runs it)."""
    ran: list[str] = []
    run = Scope.run

    def recorded(scope: Scope, query: exp.Query) -> DataFrame:
        ran.append(query.sql("spark"))
        return run(scope, query)

    monkeypatch.setattr(Scope, "run", recorded)
    return ran


GROUPED = "SELECT carrier, MIN(fare) AS lo FROM flights WHERE month > 1 GROUP BY carrier"
JOINED = ("SELECT f.carrier, a.name FROM flights f JOIN airlines a ON f.carrier = a.carrier "
          "WHERE f.fare > 6")
DERIVED = ("SELECT d.carrier, d.lo FROM (SELECT carrier, MIN(fare) AS lo FROM flights "
           "GROUP BY carrier) d WHERE d.lo > 1")


@pytest.mark.parametrize(("sql", "path"), [
    (GROUPED, ()), (GROUPED, (0,)), (GROUPED, (0, 0)), (JOINED, (0, 0)), (JOINED, (0, 0, 1)),
    (DERIVED, (0,)), (DERIVED, (0, 0)), (DERIVED, (0, 0, 0)),
], ids=["aggregate", "its filter", "its scan", "join", "a scan in the join", "filter over a "
        "derived table", "the derived table", "the derived table's aggregate"])
def test_a_node_whose_law_has_no_rule_stops_the_tick(spark: SparkSession, sql: str,
                                                     path: tuple[int, ...]) -> None:
    """A node marked full recompute inside an incremental plan is not run another way:
    the tick stops with an error naming it, whatever its depth."""
    plan = compile_view("v", sql, SCHEMAS)
    assert plan.incremental, plan.reason
    broken = _with_root(plan, _relabel(plan.root, path, Law.FULL_RECOMPUTE))
    with pytest.raises(IvmError, match="full recompute law") as raised:
        maintain(broken, _inputs(spark), local=False)
    assert raised.value.fragment == _at(plan.root, path).detail


def _local_inputs(spark: SparkSession) -> dict[str, SourceInput]:
    """:func:`_inputs` with the change feed in Arrow and the sources readable on the driver."""
    inputs = {}
    for name, given in _inputs(spark).items():
        new, old = (to_arrow(frame_of(rows)) for rows in (given.new, given.old)
                    if rows is not None)
        delta = to_arrow(frame_of(given.delta)) if given.delta is not None else None
        inputs[name] = replace(given, delta_arrow=delta, read_arrow=arrow_reader(new, old))
    return inputs


@pytest.mark.parametrize(("sql", "path"), [
    (GROUPED, (0,)), (GROUPED, (0, 0)), (JOINED, (0, 0)), (JOINED, (0, 0, 1)),
], ids=["its filter", "its scan", "join", "a scan in the join"])
def test_the_local_engine_runs_the_plan_node_by_node_too(spark: SparkSession, sql: str,
                                                         path: tuple[int, ...]) -> None:
    """The local engine applies each node's law as Spark does: the plan ticks there, and a
    node below the top relabelled full recompute stops its run, naming it."""
    plan = compile_view("v", sql, SCHEMAS)
    inputs = _local_inputs(spark)
    ran = maintain(plan, inputs)
    assert ran.engine == "local", ran.engine_reason
    view = multiset(recompute(plan, {name: SourceInput(given.old or given.new)
                                     for name, given in inputs.items()}).collect())
    for row in ran.rows.collect():
        view[normal_row(tuple(row)[:-1])] += row["_weight"]
    assert +view == multiset(recompute(plan, inputs).collect())
    broken = _relabel(plan.root, path, Law.FULL_RECOMPUTE)
    scope = Scope(lambda: spark, "t", {"flights"},
                  {"flights": inputs["flights"].delta_arrow},
                  {name: given.read_arrow for name, given in inputs.items()})
    with pytest.raises(IvmError, match="full recompute law") as raised:
        execute.run(scope, broken, LOCAL)  # the local rules, with no Spark fallback
    assert raised.value.fragment == _at(plan.root, path).detail


def _at(node: PlanNode, path: tuple[int, ...]) -> PlanNode:
    for index in path:
        node = node.children[index]
    return node


def _relabel(node: PlanNode, path: tuple[int, ...], law: Law) -> PlanNode:
    if not path:
        return replace(node, law=law)
    children = list(node.children)
    children[path[0]] = _relabel(children[path[0]], path[1:], law)
    return replace(node, children=tuple(children))


def test_every_node_but_a_scan_carries_the_sql_its_law_runs_over() -> None:
    """Set operations, blocks and derived tables: the tree holds what the executor reads."""
    plan = compile_view(
        "v", "SELECT d.carrier, a.name, d.n FROM (SELECT carrier, COUNT(*) AS n FROM flights "
        "GROUP BY carrier) d JOIN airlines a ON d.carrier = a.carrier WHERE d.n > 1 "
        "UNION ALL SELECT carrier, name, 0 AS n FROM airlines", SCHEMAS)
    nodes = list(_walk(plan.root))
    assert {n.operator for n in nodes} >= {"union all", "project", "filter", "join",
                                          "derived table", "aggregate", "scan"}
    for node in nodes:
        assert (node.query is None) == (node.operator == "scan"), node
    assert plan.root.query is plan.query
    project = plan.root.children[0]
    assert project.children[0].query is project.query  # the filter: the same block


def _walk(node: PlanNode) -> Iterator[PlanNode]:
    yield node
    for child in node.children:
        yield from _walk(child)
