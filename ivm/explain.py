"""Render a view plan as an indented tree (``lakehouse explain VIEW``)."""

from __future__ import annotations

from typing import Any

from ivm.engine_rule import LOCAL_LIMITS, local_refusal
from ivm.plan import PlanNode, ViewPlan


def explain(plan: ViewPlan) -> str:
    """Describe how each node of ``plan`` is maintained.

    Returns:
        Lines of text: the engine that runs the view's ticks (:mod:`ivm.engine_rule`), then
        one per node with its law (or the reason it is not incremental), its key and the
        state it reads, children indented.
    """
    mode = "incremental" if plan.incremental else f"full recompute ({plan.reason})"
    key = ", ".join(plan.key) if plan.key is not None else "none (rows kept with multiplicity)"
    refused = local_refusal(plan)
    engine = (f"spark ({refused})" if refused is not None
              else f"local (DuckDB) within: {LOCAL_LIMITS}; else spark")
    lines = [f"view {plan.view}: {mode}", f"key: {key}", f"engine: {engine}"]
    _render(plan.root, 0, lines)
    return "\n".join(lines)


def explain_tree(plan: ViewPlan) -> dict[str, Any]:
    """What :func:`explain` says, as JSON-ready data.

    Returns:
        ``{"view", "incremental", "reason", "key", "engine": {"engine", "reason"},
        "root"}``; each node ``{"operator", "law", "law_reason", "detail", "key",
        "state", "children"}`` (``key`` a list of columns or None, ``state`` a list).
    """
    refused = local_refusal(plan)
    return {
        "view": plan.view, "incremental": plan.incremental, "reason": plan.reason,
        "key": list(plan.key) if plan.key is not None else None,
        "engine": ({"engine": "spark", "reason": refused} if refused is not None
                   else {"engine": "local", "reason": f"within: {LOCAL_LIMITS}; else spark"}),
        "root": _node(plan.root),
    }


def _node(node: PlanNode) -> dict[str, Any]:
    return {"operator": node.operator, "law": node.law.value, "law_reason": node.reason,
            "detail": node.detail, "key": list(node.key) if node.key is not None else None,
            "state": list(node.state), "children": [_node(c) for c in node.children]}


def _render(node: PlanNode, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    law = node.law.value + (f": {node.reason}" if node.reason else "")
    lines.append(f"{pad}- {node.operator} [{law}] {node.detail}")
    if node.key is not None:
        lines.append(f"{pad}    key: ({', '.join(node.key)})")
    if node.state:
        lines.append(f"{pad}    reads: {', '.join(node.state)}")
    for child in node.children:
        _render(child, depth + 1, lines)
