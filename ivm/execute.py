"""Execute a view's plan: each node's delta by the law the plan gives it, on one engine.

The tree :mod:`ivm.compiler` builds, and ``lakehouse explain`` prints, is what runs, on
either engine: :func:`run` walks it node by node, checks each node's law, and applies the
engine's rule for that law (:class:`EngineRules`). Spark's rules (:data:`SPARK`, here) run
every law; the local engine's (:data:`ivm.local_rules.LOCAL`) run a block's linear and
affected-key laws in process and refuse the rest, which then run on Spark. A node's
:attr:`~ivm.plan.PlanNode.law` picks the rule applied to it, over the SQL it holds
(:attr:`~ivm.plan.PlanNode.query`):

- a set operation combines its branches' deltas: UNION ALL by the linear law, the
  others by recomputing the rows in a branch's delta;
- a block's input node (under an optional filter, linear: inside every term) yields the
  block's delta terms: an inner join by the bilinear join rule, a scan by its change
  feed, a derived table by its own plan's delta (a virtual source); an outer join by
  affected-key recompute of the join keys in any input's change feed (its rows for those
  keys at new, +1, and at old, -1);
- the block's top node applies its law to those terms: a projection is linear (their
  union), an aggregate, DISTINCT or partitioned window recomputes the affected keys
  (the invertible aggregate too, when its state cannot serve), and a window over the
  whole input recomputes the affected range of ranks.

A node whose law has no rule here (a full recompute) raises; ticks run no other path.
Sources: Gupta and Mumick (IEEE Data Eng. Bull. 1995) for the laws, DBSP (Budiu et al.,
VLDB 2023) for the Z-set form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from ivm.change_keys import arrow_keys, spark_keys
from ivm.errors import IvmError
from ivm.key_ranges import join_columns, restricted
from ivm.laws import Law
from ivm.plan import PlanNode, block_input
from ivm.rank_ranges import affected_ranks, rank_orders
from ivm.rewrite import (
    affected_groups,
    at_role,
    delta_term,
    join_keys_term,
    key_projection,
    restrict_to_join_keys,
    union_all,
    weighted,
)
from ivm.scope import Scope
from ivm.shape import SET_OPERATIONS, block_tables, derived_tables, key_expressions, outer_join
from ivm.zset import WEIGHT, consolidate, data_columns, with_weight

if TYPE_CHECKING:
    from ivm.engine_rule import Engine

__all__ = ["SPARK", "BlockRule", "EngineRules", "delta", "input_rows", "run"]

R = TypeVar("R")

BlockRule = Callable[[Scope, PlanNode, exp.Select], R | str]
"""A law's rule on one engine: the delta of a block's top node (the node, and its SELECT
with derived tables lifted) as a Z-set of that engine; or why the engine cannot run it."""


@dataclass(frozen=True)
class EngineRules(Generic[R]):
    """The rules one engine applies the laws by: the engine interface of :func:`run`.

    Attributes:
        name: The engine.
        blocks: The rule of each law the engine runs at a block's top node.
        empty: The Z-set of a block none of whose tables changed.
        set_operation: Combines a set operation's branches' deltas by the node's law; None
            when the engine runs no set operation.
        lifts_derived_tables: Whether a derived table becomes a virtual source (its delta
            computed by its own plan) before the block's rule runs; when False, the rule
            sees the derived table in the block.
    """

    name: Engine
    blocks: Mapping[Law, BlockRule[R]]
    empty: Callable[[Scope, exp.Select], R]
    set_operation: Callable[[Scope, PlanNode, R, R], R] | None = None
    lifts_derived_tables: bool = False


def run(scope: Scope, node: PlanNode, engine: EngineRules[R]) -> R | str:
    """The delta of ``node``'s rows, by its law, on ``engine``.

    Args:
        scope: The evaluation's relations.
        node: A set operation's node or a block's top node, with its query.
        engine: The rules to apply.

    Returns:
        A Z-set of the engine (a Spark frame, an Arrow table): the node's output columns
        plus ``_weight`` (int64), not consolidated; or why the engine cannot run a node.

    Raises:
        IvmError: A node's law is not one the plan's shape allows (a malformed plan), or
            no engine has a rule for it.
    """
    if isinstance(node.query, SET_OPERATIONS):  # its operator names it: UNION ALL, EXCEPT...
        if len(node.children) != 2 or node.law not in (Law.LINEAR, Law.AFFECTED_KEY_RECOMPUTE):
            raise _unrunnable(node)
        if engine.set_operation is None:
            return f"the {engine.name} engine runs no set operation ({node.operator})"
        left = run(scope, node.children[0], engine)
        if isinstance(left, str):
            return left
        right = run(scope, node.children[1], engine)
        if isinstance(right, str):
            return right
        return engine.set_operation(scope, node, left, right)
    if node.law not in _BLOCK_LAWS or not isinstance(node.query, exp.Select):
        raise _unrunnable(node)
    rule = engine.blocks.get(node.law)
    if rule is None:
        return f"the {engine.name} engine has no rule for the {node.law} law ({node.operator})"
    block = node.query
    items = _input_items(_block_input(node))
    if engine.lifts_derived_tables:
        block = _lift_derived_tables(scope, block, items)
    if not derived_tables(block) and not any(t.name in scope.changed
                                             for t in block_tables(block)):
        return engine.empty(scope, block)  # (a derived table not lifted: the rule decides)
    return rule(scope, node, block)


def delta(scope: Scope, node: PlanNode) -> DataFrame:
    """The delta of ``node``'s rows on Spark, which runs every law (:func:`run`).

    Returns:
        A Z-set: the node's output columns plus ``_weight`` (int64), not consolidated.

    Raises:
        IvmError: The node, or one below it, has no rule to run its law by.
    """
    rows = run(scope, node, SPARK)
    if isinstance(rows, str):
        raise IvmError(rows, fragment=node.detail)
    return rows


def input_rows(node: PlanNode, rows: exp.Select) -> PlanNode:
    """A projection of an aggregate node's input: ``rows`` over the same children.

    The invertible-aggregate law adds the delta of its input rows (each row's groups and
    arguments, :meth:`ivm.aggregate_form.AggregateForm.rows`) to its state; that delta is
    this node's, by the linear law over the terms of the node under the aggregate.
    """
    return replace(node, operator="project", law=Law.LINEAR, key=None, state=(),
                   detail=f"the input rows of {node.detail}", query=rows)  # no SQL generated


def _unrunnable(node: PlanNode) -> IvmError:
    """The error for a node whose law has no rule here (a full recompute, a wrong shape)."""
    return IvmError(f"no rule runs a {node.operator} node by the {node.law} law here",
                    fragment=node.detail)


def _block_input(node: PlanNode) -> PlanNode:
    """The node under a block's top node and its filter (linear, :func:`ivm.plan.block_input`).

    Raises:
        IvmError: The node is not a block's top node, or its filter is not linear.
    """
    below = block_input(node)
    if below is None:
        raise _unrunnable(node)
    above = node.children[0]
    if above is not below and above.law is not Law.LINEAR:
        raise _unrunnable(above)
    return below


_ITEM_LAWS = {"scan": Law.CHANGE_FEED, "derived table": Law.LINEAR}
"""The law of a block's FROM or JOIN item, by its operator: a source's change feed, or a
derived table's own delta (a virtual source, linear in it)."""


def _input_items(below: PlanNode) -> tuple[PlanNode, ...]:
    """The block's FROM and JOIN items under its input node, each checked against its law.

    An inner join combines them by the bilinear join rule, an outer join by affected-key
    recompute of its join keys; a block of one item is that item.

    Raises:
        IvmError: A node's law is not the one its rule here applies.
    """
    items: tuple[PlanNode, ...] = (below,)
    law = (Law.BILINEAR_JOIN if below.operator == "join" else
           Law.AFFECTED_KEY_RECOMPUTE if below.operator.endswith("outer join") else None)
    if law is not None:
        if below.law is not law:
            raise _unrunnable(below)
        items = below.children
    for item in items:
        if item.law is not _ITEM_LAWS.get(item.operator):
            raise _unrunnable(item)
    return items


def _terms(scope: Scope, node: PlanNode, block: exp.Select) -> list[exp.Select]:
    """The block's delta terms on Spark, each with ``_weight``.

    Under an outer join (affected-key recompute of its join keys), its rows for those keys
    at new and old; else one term per changed table (the bilinear join rule, or a scan's
    change feed).
    """
    if _block_input(node).law is Law.AFFECTED_KEY_RECOMPUTE:  # an outer join
        return _outer_join_terms(scope, block)
    changed = [i for i, t in enumerate(block_tables(block)) if t.name in scope.changed]
    return [_restricted_term(scope, block, i) for i in changed]


def _restricted_term(scope: Scope, block: exp.Select, position: int) -> exp.Select:
    """The delta term of the table at ``position``, its partners cut to the key range.

    See :mod:`ivm.key_ranges`; the keys are read from the change's Arrow table when the
    caller gave one, else with one small Spark job over the change feed.
    """
    term = delta_term(block, position, scope.relation)
    table = block_tables(block)[position]
    pairs = join_columns(block, table.alias_or_name)
    if not pairs:
        return term
    names = sorted({mine.name for mine, _ in pairs})
    arrow = scope.arrows.get(table.name)
    keys = arrow_keys(arrow, names) if arrow is not None else None
    if keys is None:
        keys = spark_keys(scope.table("delta", table.name), names)
    return restricted(term, pairs, keys)


def _outer_join_terms(scope: Scope, block: exp.Select) -> list[exp.Select]:
    """An outer join's rows for the join keys in any input's change feed: +1 at new, -1 at old."""
    outer = outer_join(block)
    if outer is None:
        raise IvmError("an outer join node over a block without an outer join",
                       fragment=block.sql("spark"))
    changed = [t.alias_or_name for t in block_tables(block) if t.name in scope.changed]
    terms = [join_keys_term(block, outer, alias, scope.relation) for alias in changed]
    join_keys = scope.register(scope.run(union_all(terms)), "joinkeys")
    return [weighted(restrict_to_join_keys(block, outer, role, join_keys, scope.relation), weight)
            for role, weight in (("new", 1), ("old", -1))]


def _lift_derived_tables(scope: Scope, block: exp.Select, items: Sequence[PlanNode]
                         ) -> exp.Select:
    """``block`` with each derived table turned into a virtual source.

    The derived table's rows at new and old become the source's snapshots, and the delta
    of its own plan (its node's child, among ``items``) the source's change feed, so the
    block is maintained like any other.

    Raises:
        IvmError: The block's derived tables are not its items' derived-table nodes.
    """
    if not derived_tables(block):
        return block
    lifted = block.copy()
    subqueries = derived_tables(lifted)
    nodes = [item for item in items if item.operator == "derived table"]
    if len(nodes) != len(subqueries):
        raise IvmError("the plan's derived tables are not the block's",
                       fragment=block.sql("spark"))
    for subquery, derived in zip(subqueries, nodes, strict=True):
        alias = exp.TableAlias(this=exp.to_identifier(subquery.alias_or_name))
        name = _virtual_source(scope, derived)
        subquery.replace(exp.Table(this=exp.to_identifier(name), alias=alias))
    return lifted


def _virtual_source(scope: Scope, derived: PlanNode) -> str:
    """The virtual source of a derived table, registered once per evaluation.

    The branches of an expanded ROLLUP or CUBE each read a copy of the block's input
    (:mod:`ivm.expand_grouping_sets`): a body seen before is read from the same relations
    rather than computed again. Its delta is materialized when it is lifted (a local
    checkpoint, on the executors), so the plans of its readers hold it as one leaf.
    """
    body = derived.query
    if body is None or len(derived.children) != 1:
        raise _unrunnable(derived)
    key = body.sql("spark")
    name = scope.derived.get(key)
    if name is not None:
        return name
    name = scope.derived[key] = f"__derived{next(scope.counter)}"
    for role in ("new", "old"):
        scope.register(scope.run(at_role(body, role, scope.relation)), role, name)
    if {t.name for t in body.find_all(exp.Table)} & scope.changed:
        # computed once, on the executors: each reader (every branch of a ROLLUP) would
        # otherwise carry the body's whole delta plan, which Spark analyses per copy
        rows = consolidate(delta(scope, derived.children[0])).localCheckpoint(eager=True)
        scope.register(rows, "delta", name)
        scope.changed.add(name)
    return name


def _linear(scope: Scope, node: PlanNode, block: exp.Select) -> DataFrame:
    """Filter and project: the block's delta is the union of its terms."""
    return scope.run(union_all(_terms(scope, node, block)))


def _recompute_keys(scope: Scope, node: PlanNode, block: exp.Select) -> DataFrame:
    """Affected-key recompute: the block for the keys in its terms, at new (+1) and old (-1)."""
    terms = _terms(scope, node, block)
    keys = key_expressions(block)
    if keys is None:
        raise IvmError("affected-key recompute of a block without keys",
                       fragment=block.sql("spark"))
    keys_view = None
    if keys:
        keys_view = scope.register(
            scope.run(union_all([key_projection(term, keys) for term in terms])), "keys")
    sides = [affected_groups(block, keys, "new", keys_view, 1, scope.relation),
             affected_groups(block, keys, "old", keys_view, -1, scope.relation)]
    return scope.run(union_all(sides))


def _affected_ranks(scope: Scope, node: PlanNode, block: exp.Select) -> DataFrame:
    """Ranks over the whole input: the rows at or after the first changed order value.

    The order values of ``terms``' rows are kept as a relation; the block is then
    computed at new (+1) and old (-1) and restricted to the affected range of any window
    (:mod:`ivm.rank_ranges`). ``terms`` hold every changed row of the window's input:
    the delta terms of an inner-join block, or an outer join's rows for the affected
    join keys at both snapshots.
    """
    terms = _terms(scope, node, block)
    orders = rank_orders(block)
    if orders is None:
        raise IvmError("affected-range recompute of a block without a rank over its input",
                       fragment=block.sql("spark"))
    values = [order.expression for order in orders]
    keys_view = scope.register(
        scope.run(union_all([key_projection(term, values) for term in terms])), "keys")
    sides = [affected_ranks(block, orders, role, keys_view, weight, scope.relation)
             for role, weight in (("new", 1), ("old", -1))]
    return scope.run(union_all(sides))


_SPARK_RULES: dict[Law, BlockRule[DataFrame]] = {
    Law.LINEAR: _linear,
    Law.AFFECTED_KEY_RECOMPUTE: _recompute_keys,
    # the invertible aggregate's groups recomputed: its delta when no state can serve
    # (a sum overflowed its type, or Spark types an argument as inexact)
    Law.INVERTIBLE_AGGREGATE: _recompute_keys,
    Law.AFFECTED_RANGE_RECOMPUTE: _affected_ranks,
}


def _set_operation(scope: Scope, node: PlanNode, left: DataFrame, right: DataFrame
                   ) -> DataFrame:
    """A set operation's delta from its branches' deltas.

    UNION ALL by the linear law (their union); UNION, INTERSECT and EXCEPT by recomputing
    the rows that occur in a branch's delta, at new (+1) and old (-1).
    """
    assert node.query is not None, "run checks a set operation's query"
    rows = left.union(right.toDF(*left.columns))
    if node.law is Law.LINEAR:
        return rows
    affected = rows.drop(WEIGHT).distinct()
    affected = affected.toDF(*[f"__k{i}" for i in range(len(affected.columns))])
    sides = []
    for role, weight in (("new", 1), ("old", -1)):
        result = scope.run(at_role(node.query, role, scope.relation))
        result = result.join(affected, on=_same_row(result, affected), how="left_semi")
        sides.append(with_weight(result, weight))
    return sides[0].union(sides[1])


def _same_row(frame: DataFrame, keys: DataFrame) -> Column:
    """Null-safe equality of every column of ``frame`` with the same position in ``keys``."""
    condition = F.lit(True)
    for mine, theirs in zip(data_columns(frame), keys.columns, strict=True):
        condition = condition & frame[mine].eqNullSafe(keys[theirs])
    return condition


def _spark_empty(scope: Scope, block: exp.Select) -> DataFrame:
    """No row of the block's output, typed as Spark types it."""
    return with_weight(scope.run(at_role(block, "new", scope.relation)).limit(0))


SPARK: EngineRules[DataFrame] = EngineRules(
    "spark", _SPARK_RULES, _spark_empty, _set_operation, lifts_derived_tables=True)
"""Spark's rules: every law the plan gives a node."""

_BLOCK_LAWS = frozenset(_SPARK_RULES)
"""The laws a block's top node may carry (Spark has a rule for each)."""
