"""Compile a view's SQL into an incremental plan.

The SQL is parsed with sqlglot (Spark dialect) and qualified against the source
schemas, so every column is resolved to its source and ``*`` is expanded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify

from ivm.checks import find_reason
from ivm.errors import SqlParseError
from ivm.laws import Law
from ivm.plan import PlanNode, ViewPlan

Schemas = Mapping[str, Mapping[str, str]]
"""Source name -> column name -> Spark SQL type, e.g. ``{"flights": {"month": "int"}}``."""


def compile_view(
    view: str, sql: str, schemas: Schemas, key: Sequence[str] | None = None
) -> ViewPlan:
    """Compile ``sql`` into the plan that maintains view ``view``.

    Args:
        view: The view's name (for errors and EXPLAIN).
        sql: One SELECT statement over the sources, in Spark SQL.
        schemas: The schema of every source the SQL may read.
        key: Output columns the user declares unique; overrides the inferred key.

    Returns:
        The plan. A view that cannot be maintained incrementally gets a plan whose
        ``reason`` names the construct at fault; it is not an error here.

    Raises:
        SqlParseError: The SQL does not parse, reads an unknown source, or names a
            column that does not resolve.
    """
    query = _qualified(view, sql, schemas)
    columns = tuple(p.alias_or_name for p in query.selects)
    if len(set(columns)) != len(columns):
        raise SqlParseError("output column names must be unique", view=view, fragment=sql)
    sources = tuple(t.name for t in block_tables(query))
    found = find_reason(query)
    reason = found[0] if found else None
    inferred = _inferred_key(query) if reason is None else None
    chosen = tuple(key) if key else inferred
    if chosen is not None and not set(chosen) <= set(columns):
        raise SqlParseError(
            f"key {list(chosen)} is not among the output columns {list(columns)}", view=view
        )
    root = _full_node(query, found) if found else _tree(query, chosen)
    return ViewPlan(view, query.sql("spark"), sources, columns, chosen, root, reason, query)


def _qualified(view: str, sql: str, schemas: Schemas) -> exp.Select:
    try:
        statements = sqlglot.parse(sql, dialect="spark")
    except ParseError as error:
        raise SqlParseError(f"SQL does not parse: {error}", view=view, fragment=sql) from error
    if len(statements) != 1 or statements[0] is None:
        raise SqlParseError("a view is exactly one SELECT statement", view=view, fragment=sql)
    for table in statements[0].find_all(exp.Table):
        if table.name not in schemas and not _is_cte(statements[0], table.name):
            raise SqlParseError(
                f"unknown source {table.name!r}; known: {sorted(schemas)}",
                view=view, fragment=table.sql("spark"),
            )
    try:
        schema: dict[str, object] = {name: dict(columns) for name, columns in schemas.items()}
        qualified = qualify(statements[0], schema=schema, dialect="spark", quote_identifiers=False)
    except OptimizeError as error:
        raise SqlParseError(str(error), view=view, fragment=sql) from error
    if not isinstance(qualified, exp.Query):
        raise SqlParseError("a view is a SELECT query", view=view, fragment=sql)
    return qualified  # type: ignore[return-value]


def _is_cte(statement: exp.Expr, name: str) -> bool:
    return any(cte.alias == name for cte in statement.find_all(exp.CTE))


def block_tables(query: exp.Select) -> list[exp.Table]:
    """The tables of the top block, in FROM then JOIN order."""
    from_ = query.args.get("from_")
    items = [from_.this] if from_ else []
    items += [join.this for join in query.args.get("joins") or []]
    return [item for item in items if isinstance(item, exp.Table)]


def group_expressions(query: exp.Select) -> list[exp.Expr] | None:
    """The grouping expressions of the top block, or None when it does not group.

    A SELECT DISTINCT groups by all its output expressions; an aggregate without
    GROUP BY groups by the empty key (one group).
    """
    group = query.args.get("group")
    if group is not None:
        return [_resolve_position(query, g) for g in group.expressions]
    if query.args.get("distinct") is not None:
        return [p.unalias() for p in query.selects]
    if any(p.find(exp.AggFunc) for p in query.selects):
        return []
    return None


def _resolve_position(query: exp.Select, item: exp.Expr) -> exp.Expr:
    if isinstance(item, exp.Literal) and item.is_int:
        return query.selects[int(item.this) - 1].unalias()
    return item


def _inferred_key(query: exp.Select) -> tuple[str, ...] | None:
    groups = group_expressions(query)
    if groups is None:
        return None
    names: list[str] = []
    for group in groups:
        match = [p.alias_or_name for p in query.selects if p.unalias() == group]
        if not match:
            return None
        names.append(match[0])
    return tuple(names)


def _scan_nodes(query: exp.Select) -> tuple[PlanNode, ...]:
    return tuple(
        PlanNode("scan", t.sql("spark"), Law.CHANGE_FEED, state=(f"{t.name} change feed",))
        for t in block_tables(query)
    )


def _full_node(query: exp.Select, found: tuple[str, str]) -> PlanNode:
    reason, fragment = found
    return PlanNode(
        "query", fragment, Law.FULL_RECOMPUTE, reason=reason,
        state=tuple(f"{t.name}@new" for t in block_tables(query)), children=_scan_nodes(query),
    )


def _tree(query: exp.Select, key: tuple[str, ...] | None) -> PlanNode:
    tables = block_tables(query)
    node_children = _scan_nodes(query)
    node: PlanNode
    if len(tables) > 1:
        conditions = [j.args["on"].sql("spark") for j in query.args.get("joins") or [] if
                      j.args.get("on") is not None]
        state = tuple(f"{t.name}@{v}" for t in tables for v in ("old", "new"))
        node = PlanNode("join", " AND ".join(conditions) or "cross join", Law.BILINEAR_JOIN,
                        state=state, children=node_children)
    else:
        node = node_children[0]
    where = query.args.get("where")
    if where is not None:
        node = PlanNode("filter", where.this.sql("spark"), Law.LINEAR, children=(node,))
    groups = group_expressions(query)
    outputs = ", ".join(p.sql("spark") for p in query.selects)
    if groups is None:
        return PlanNode("project", outputs, Law.LINEAR, key=key, children=(node,))
    having = query.args.get("having")
    detail = f"GROUP BY {', '.join(g.sql('spark') for g in groups) or '()'}: {outputs}"
    if having is not None:
        detail += f" {having.sql('spark')}"
    state = tuple(f"{t.name}@{v} for affected keys" for t in tables for v in ("old", "new"))
    return PlanNode("aggregate", detail, Law.AFFECTED_KEY_RECOMPUTE, key=key, state=state,
                    children=(node,))


def referenced_sources(sql: str) -> set[str]:
    """The names of the tables ``sql`` reads (CTE names excluded).

    Raises:
        SqlParseError: The SQL does not parse.
    """
    try:
        statement = sqlglot.parse_one(sql, dialect="spark")
    except ParseError as error:
        raise SqlParseError(f"SQL does not parse: {error}", fragment=sql) from error
    return {t.name for t in statement.find_all(exp.Table) if not _is_cte(statement, t.name)}
