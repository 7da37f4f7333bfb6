"""The local engine's rules for the laws: a block's delta in process, no Spark job.

:func:`ivm.execute.run` walks a view's plan node by node on either engine; these are the
rules it applies on the local engine (DuckDB over Arrow, :mod:`ivm.local_engine`), over
the change feeds given in Arrow and the partners read on the driver:

- the linear law at a block of filters, projections and inner joins: the union of its
  delta terms (:func:`ivm.driver_delta.block_delta`);
- affected-key recompute at an aggregate over such a block: its affected groups
  recomputed from the rows read for them (:func:`ivm.local_recompute.recompute_delta`).

Every other node (a set operation, an outer join, a window, a derived table, an
expression outside :mod:`ivm.spark_types`' subset) is refused with the reason, and the
tick runs on Spark (:data:`ivm.execute.SPARK`). :func:`refusal` gives the same verdict
before a tick, from the plan alone (``lakehouse explain``).
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ivm.driver_delta import EMPTY, block_delta, block_refusal
from ivm.execute import EngineRules
from ivm.laws import Law
from ivm.local_recompute import grouped_block, recompute_delta
from ivm.plan import PlanNode, block_input
from ivm.scope import Scope

__all__ = ["LOCAL", "refusal", "shape_refusal"]


def refusal(node: PlanNode) -> str | None:
    """Why the local engine cannot run a block's top node whatever the tick reads, or None.

    Args:
        node: A block's top node with its query (a set operation's node is refused).

    Returns:
        The reason, naming the construct at fault; None when the local rules take it.
    """
    shape = shape_refusal(node)
    if shape is not None:
        return shape
    assert isinstance(node.query, exp.Select), "shape_refusal checks it"
    if node.law is Law.LINEAR:
        return block_refusal(node.query)
    grouped = grouped_block(node.query)
    return grouped if isinstance(grouped, str) else None


def shape_refusal(node: PlanNode) -> str | None:
    """Why no local rule applies to the node's operator and law, or None.

    A check of the plan's shape alone, without :func:`refusal`'s walk of the block's
    expressions (the rules walk them as they run). An aggregate's outer join is refused by
    :func:`ivm.local_recompute.grouped_block`.
    """
    below = block_input(node)
    if isinstance(node.query, exp.Select) and below is not None and (
            (node.operator, node.law) == ("aggregate", Law.AFFECTED_KEY_RECOMPUTE)
            or (node.operator, node.law) == ("project", Law.LINEAR)
            and below.law is not Law.AFFECTED_KEY_RECOMPUTE):  # not over an outer join
        return None
    return (f"only filters, projections, inner joins and aggregates over them run locally "
            f"yet (this view's top node: {node.operator}, {node.law})")


def _linear(scope: Scope, node: PlanNode, block: exp.Select) -> pa.Table | str:
    """Filter, project and inner joins: the union of the block's delta terms."""
    return shape_refusal(node) or block_delta(
        block, scope.arrows, scope.readers, scope.relation, scope.read_max_rows)


def _recompute_keys(scope: Scope, node: PlanNode, block: exp.Select) -> pa.Table | str:
    """An aggregate's affected groups, at new (+1) and old (-1)."""
    grouped = shape_refusal(node) or grouped_block(block)
    if isinstance(grouped, str):
        return grouped
    return recompute_delta(grouped, scope.arrows, scope.readers, scope.relation,
                           scope.read_max_rows)


def _empty(scope: Scope, block: exp.Select) -> pa.Table:
    """No row (no column either: the caller types it, as the view's or the state's)."""
    return EMPTY


LOCAL: EngineRules[pa.Table] = EngineRules(
    "local", {Law.LINEAR: _linear, Law.AFFECTED_KEY_RECOMPUTE: _recompute_keys}, _empty)
"""The local engine's rules: a block's linear and affected-key laws, nothing else."""
