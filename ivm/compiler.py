"""Compile a view's SQL into an incremental plan.

The SQL is parsed with sqlglot (Spark dialect) and qualified against the source
schemas, so every column is resolved to its source and ``*`` is expanded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from ivm.aggregate_form import invertible
from ivm.checks import find_reason
from ivm.errors import SqlParseError
from ivm.expand_grouping_sets import expand_grouping_sets
from ivm.factor_or_conjuncts import factor_or_conjuncts
from ivm.isolate_outer_join import isolate_outer_joins
from ivm.keys import SourceKeys, annotate, block_key, item_key, output_key
from ivm.laws import Law
from ivm.lift_grouped_windows import lift_grouped_windows
from ivm.nest_outer_joins import nest_outer_joins
from ivm.plan import PlanNode, TopKPlan, ViewPlan
from ivm.rank_ranges import rank_orders
from ivm.rank_unique_row_numbers import rank_unique_row_numbers
from ivm.shape import (
    SET_OPERATIONS,
    block_items,
    block_tables,
    is_union_all,
    key_expressions,
    outer_join,
    set_branches,
    windows,
)
from ivm.top_k import TopKQuery, buffer_rows, top_k_query, without_order
from ivm.unnest_not_in import unnest_not_in
from ivm.unwrap_branches import unwrap_branches

Schemas = Mapping[str, Mapping[str, str]]
"""Source name -> column name -> Spark SQL type, e.g. ``{"flights": {"month": "int"}}``."""


def compile_view(
    view: str, sql: str, schemas: Schemas, key: Sequence[str] | None = None,
    source_keys: SourceKeys | None = None,
) -> ViewPlan:
    """Compile ``sql`` into the plan that maintains view ``view``.

    Args:
        view: The view's name (for errors and EXPLAIN).
        sql: One SELECT statement over the sources, in Spark SQL.
        schemas: The schema of every source the SQL may read.
        key: Output columns the user declares unique; overrides the inferred key.
        source_keys: The primary key of each keyed source (Iceberg identifier fields or
            the config's ``key``); carried through filters, projections and joins.

    Returns:
        The plan. A view that cannot be maintained incrementally gets a plan whose
        ``reason`` names the construct at fault; it is not an error here.

    Raises:
        SqlParseError: The SQL does not parse, reads an unknown source, or names a
            column that does not resolve.
    """
    query, original = (without_order(q) for q in _qualified(view, sql, schemas))
    columns = tuple(p.alias_or_name for p in query.selects)
    if len(set(columns)) != len(columns):
        raise SqlParseError("output column names must be unique", view=view, fragment=sql)
    split = top_k_query(original)
    if isinstance(split, TopKQuery):
        return _top_k_plan(view, split, query, original, schemas, key, source_keys)
    source_keys = _source_keys(view, source_keys or {}, schemas)
    annotate(query, schemas)  # column types: an equality carries a key only within one type
    rank_unique_row_numbers(query, source_keys)
    clause = query.args.get("order") or query.args.get("limit") or query.args.get("offset")
    found = ((split, clause.sql("spark") if clause is not None else sql)
             if isinstance(split, str) else find_reason(query))
    reason = found[0] if found else None
    inferred = output_key(query, source_keys) if reason is None else None
    chosen = tuple(key) if key else inferred
    if chosen is not None and not set(chosen) <= set(columns):
        raise SqlParseError(
            f"key {list(chosen)} is not among the output columns {list(columns)}", view=view
        )
    root = _full_node(query, found) if found else _tree(query, chosen, source_keys)
    if root.operator == "aggregate" and invertible(query, schemas):
        root = replace(root, law=Law.INVERTIBLE_AGGREGATE,
                       state=("aggregate state of the affected groups (sums and counts)",))
    return ViewPlan(view, query.sql("spark"), _sources(query), columns, chosen, root, reason,
                    query, original)


def _top_k_plan(view: str, split: TopKQuery, query: exp.Query, original: exp.Query,
                schemas: Schemas, key: Sequence[str] | None,
                source_keys: SourceKeys | None) -> ViewPlan:
    """The plan of an ``ORDER BY ... LIMIT K`` view: the top-K law over its inner query.

    The inner query is compiled as a view of its own; the view is incremental when it is.
    Its key is the declared one, else the inner query's when the view outputs it.
    """
    inner = compile_view(view, split.inner.sql("spark"), schemas, None, source_keys)
    unordered = _unorderable(split, schemas)
    detail = f"{query.args['order'].sql('spark') if query.args.get('order') else ''} " \
             f"LIMIT {split.limit}".strip()
    chosen = tuple(key) if key else (
        inner.key if inner.key is not None and set(inner.key) <= set(split.outputs) else None)
    if chosen is not None and not set(chosen) <= set(split.outputs):
        raise SqlParseError(
            f"key {list(chosen)} is not among the output columns {list(split.outputs)}",
            view=view)
    reason = unordered or inner.reason
    if reason is not None:
        root = PlanNode("top-k", detail, Law.FULL_RECOMPUTE, reason=reason,
                        children=(inner.root,), query=query)
        return ViewPlan(view, query.sql("spark"), inner.sources, split.outputs, chosen, root,
                        reason, query, original)
    rows = buffer_rows(split.limit)
    root = PlanNode("top-k", detail, Law.TOP_K, key=chosen, children=(inner.root,), state=(
        f"buffer of the best {rows:,} rows of the inner query (K = {split.limit:,}); "
        "refilled from the sources only when deletions leave fewer than K",), query=query)
    return ViewPlan(view, query.sql("spark"), inner.sources, split.outputs, chosen, root, None,
                    query, original,
                    TopKPlan(inner, split.outputs, split.order, split.limit, rows))


def _unorderable(split: TopKQuery, schemas: Schemas) -> str | None:
    """Why the top-K order cannot rank the inner rows: a column Spark cannot sort (MAP)."""
    schema: dict[str, object] = {name: dict(columns) for name, columns in schemas.items()}
    typed = annotate_types(split.inner.copy(), schema=schema, dialect="spark")
    for select in typed.selects:
        if select.type is not None and select.type.is_type(exp.DataType.Type.MAP):
            return (f"top-K orders rows by every column, and Spark cannot sort "
                    f"{select.alias_or_name} (a map)")
    return None


def _source_keys(view: str, source_keys: SourceKeys, schemas: Schemas) -> SourceKeys:
    """The source keys, names normalised as the qualified query has them (Spark: lower case).

    Raises:
        SqlParseError: A key names a column its source does not have.
    """
    normal = {}
    for source, key in source_keys.items():
        columns = {c.lower() for c in schemas.get(source, {})}
        missing = [c for c in key if c.lower() not in columns]
        if missing:
            raise SqlParseError(f"key {list(key)} of source {source!r} names columns it does "
                                f"not have: {missing}", view=view)
        normal[source.lower()] = tuple(c.lower() for c in key)
    return normal


def _sources(query: exp.Query) -> tuple[str, ...]:
    """Every source the query reads, in order of first appearance."""
    ctes = {cte.alias for cte in query.find_all(exp.CTE)}
    names = [t.name for t in query.find_all(exp.Table) if t.name not in ctes]
    return tuple(dict.fromkeys(names))


def _qualified(view: str, sql: str, schemas: Schemas) -> tuple[exp.Query, exp.Query]:
    """The query rewritten for maintenance, and the query as written (only qualified).

    Qualifying resolves every column and expands ``*`` against ``schemas``; the rewrite
    rules then decorrelate subqueries and isolate outer joins.
    """
    try:
        statements = sqlglot.parse(sql, dialect="spark")
    except SqlglotError as error:  # ParseError, or TokenError (an unterminated string)
        raise SqlParseError.of(error, sql, view) from error
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
    # IN/EXISTS/scalar subqueries become LEFT JOINs to grouped derived tables (a
    # correlation in every branch of an OR taken out of it first), and NOT IN an
    # anti-join with a NULL guard.
    qualified = unwrap_branches(qualified)
    written = qualified.copy()
    unnested = _exists_for_array_any(unnest_subqueries(
        unnest_not_in(factor_or_conjuncts(_inline_ctes(qualified)), schemas)))
    lifted = lift_grouped_windows(merge_subqueries(unnested))
    expanded = expand_grouping_sets(lifted, schema)
    return nest_outer_joins(isolate_outer_joins(expanded)), written


def _exists_for_array_any(query: exp.Query) -> exp.Query:
    """Spark's ``EXISTS(list, test)`` for sqlglot's ``ARRAY_ANY`` (a correlated IN, unnested).

    sqlglot writes ``ARRAY_ANY`` for Spark as ``SIZE(list) = 0 OR SIZE(FILTER(list, test))
    <> 0``, meant to be NULL for the NULL list of an outer row no group matches; Spark's
    ``SIZE(NULL)`` is -1 (``spark.sql.legacy.sizeOfNull``), which keeps that row. ``EXISTS``
    of a NULL list is NULL. The unnested lists are never empty (one per group).
    """
    for node in list(query.find_all(exp.ArrayAny)):
        node.replace(exp.Anonymous(this="EXISTS", expressions=[node.this, node.expression]))
    return query


def _inline_ctes(query: exp.Query) -> exp.Query:
    """Replace every reference to a (non-recursive) CTE by its body as a derived table."""
    with_ = query.args.get("with_")
    if with_ is None or with_.args.get("recursive"):
        return query
    bodies: dict[str, exp.Query] = {}
    for cte in with_.expressions:
        body = cte.this.copy()
        _replace_references(body, bodies)
        bodies[cte.alias] = body
    query.set("with_", None)
    _replace_references(query, bodies)
    return query


def _replace_references(query: exp.Expr, bodies: dict[str, exp.Query]) -> None:
    for table in list(query.find_all(exp.Table)):
        if table.name in bodies and not table.db:
            alias = exp.TableAlias(this=exp.to_identifier(table.alias_or_name))
            table.replace(exp.Subquery(this=bodies[table.name].copy(), alias=alias))


def _is_cte(statement: exp.Expr, name: str) -> bool:
    return any(cte.alias == name for cte in statement.find_all(exp.CTE))


def _scan_nodes(query: exp.Select, source_keys: SourceKeys) -> tuple[PlanNode, ...]:
    """One node per FROM/JOIN item: a source's change feed, or a derived table's plan."""
    nodes: list[PlanNode] = []
    for item in block_items(query):
        key = item_key(item, source_keys)
        if isinstance(item, exp.Subquery) and not isinstance(item.this, exp.Query):
            # a parenthesized join, (a JOIN b ON ...): its tables' change feeds
            nodes.extend(PlanNode("scan", table.sql("spark"), Law.CHANGE_FEED,
                                  state=(f"{table.name} change feed",))
                         for table in item.find_all(exp.Table))
        elif isinstance(item, exp.Subquery):
            nodes.append(PlanNode("derived table", item.alias_or_name, Law.LINEAR, key=key,
                                  children=(_tree(item.this, key, source_keys),),
                                  query=item.this))
        else:
            nodes.append(PlanNode("scan", item.sql("spark"), Law.CHANGE_FEED, key=key,
                                  state=(f"{item.name} change feed",)))
    return tuple(nodes)


def _full_node(query: exp.Query, found: tuple[str, str]) -> PlanNode:
    reason, fragment = found
    branches = set_branches(query) or []
    return PlanNode(
        "query", fragment, Law.FULL_RECOMPUTE, reason=reason,
        state=tuple(f"{name}@new" for name in _sources(query)),
        children=tuple(node for b in branches for node in _scan_nodes(b, {})), query=query,
    )


def _tree(query: exp.Query, key: tuple[str, ...] | None, source_keys: SourceKeys) -> PlanNode:
    if isinstance(query, SET_OPERATIONS):
        children = tuple(_tree(q, output_key(q, source_keys), source_keys)
                         for q in (query.left, query.right))
        operator = query.key.lower() + (" all" if query.args.get("distinct") is False else "")
        if is_union_all(query):
            return PlanNode("union all", "UNION ALL", Law.LINEAR, children=children,
                            query=query)
        state = tuple(f"{n}@{v} for affected rows" for n in _sources(query) for v in ("old", "new"))
        return PlanNode(operator, operator.upper(), Law.AFFECTED_KEY_RECOMPUTE, key=key,
                        state=state, children=children, query=query)
    assert isinstance(query, exp.Select)
    node = _join_node(query, source_keys)
    where = query.args.get("where")
    if where is not None:
        node = PlanNode("filter", where.this.sql("spark"), Law.LINEAR, children=(node,),
                        key=block_key(query, source_keys, with_where=True), query=query)
    return _top_node(query, node, key)


def _join_node(query: exp.Select, source_keys: SourceKeys) -> PlanNode:
    tables = block_tables(query)
    scans = _scan_nodes(query, source_keys)
    if len(scans) == 1:
        return scans[0]
    key = block_key(query, source_keys, with_where=False)
    conditions = " AND ".join(j.args["on"].sql("spark") for j in query.args.get("joins") or []
                              if j.args.get("on") is not None) or "cross join"
    outer = outer_join(query)
    if outer is not None:
        keys = ", ".join(k.sql("spark") for k in outer.left_keys)
        state = tuple(f"{t.name}@{v} for affected join keys ({keys})" for t in tables
                      for v in ("old", "new"))
        return PlanNode(f"{outer.side.lower()} outer join", conditions,
                        Law.AFFECTED_KEY_RECOMPUTE, key=key, state=state, children=scans,
                        query=query)
    state = tuple(f"{t.name}@{v}" for t in tables for v in ("old", "new"))
    return PlanNode("join", conditions, Law.BILINEAR_JOIN, key=key, state=state,
                    children=scans, query=query)


def _top_node(query: exp.Select, node: PlanNode, key: tuple[str, ...] | None) -> PlanNode:
    outputs = ", ".join(p.sql("spark") for p in query.selects)
    keys = key_expressions(query)
    if keys is None:
        return PlanNode("project", outputs, Law.LINEAR, key=key, children=(node,), query=query)
    tables = block_tables(query)
    state = tuple(f"{t.name}@{v} for affected keys" for t in tables for v in ("old", "new"))
    listed = ", ".join(k.sql("spark") for k in keys) or "()"
    orders = rank_orders(query)
    if orders is not None:
        ordered = ", ".join(f"{o.expression.sql('spark')} {'DESC' if o.descending else 'ASC'} "
                            f"NULLS {'FIRST' if o.nulls_first else 'LAST'}" for o in orders)
        ranged = tuple(f"{t.name}@{v} for the affected range of ranks" for t in tables
                       for v in ("old", "new"))
        return PlanNode("window", f"ORDER BY {ordered}: {outputs}",
                        Law.AFFECTED_RANGE_RECOMPUTE, key=key, state=ranged, children=(node,),
                        query=query)
    if windows(query):
        return PlanNode("window", f"PARTITION BY {listed}: {outputs}",
                        Law.AFFECTED_KEY_RECOMPUTE, key=key, state=state, children=(node,),
                        query=query)
    having = query.args.get("having")
    detail = f"GROUP BY {listed}: {outputs}" + (f" {having.sql('spark')}" if having else "")
    return PlanNode("aggregate", detail, Law.AFFECTED_KEY_RECOMPUTE, key=key, state=state,
                    children=(node,), query=query)


@lru_cache(maxsize=256)
def referenced_sources(sql: str) -> frozenset[str]:
    """The names of the tables ``sql`` reads (CTE names excluded).

    Parsed once per SQL text: every tick asks it of its view (its order among views,
    its schema check), and parsing takes about 10 ms.

    Raises:
        SqlParseError: The SQL does not parse.
    """
    try:
        statement = sqlglot.parse_one(sql, dialect="spark")
    except SqlglotError as error:  # ParseError, or TokenError (an unterminated string)
        raise SqlParseError.of(error, sql) from error
    return frozenset(t.name for t in statement.find_all(exp.Table)
                     if not _is_cte(statement, t.name))
