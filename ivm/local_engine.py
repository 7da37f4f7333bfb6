"""The local engine: a block's SQL run in process on DuckDB, where it equals Spark's answer.

A small change needs no Spark job when its delta terms can run over Arrow tables (the change
feed and, for a join, the partners read on the driver). :func:`run` runs such a term on
DuckDB (one in-memory database per process, a cursor per call) after
:mod:`ivm.spark_types` typed every expression by Spark's rules and rewrote it so that DuckDB
computes in those types; for anything outside that subset, or when DuckDB stops on a value
Spark would wrap or turn into NULL (an overflow), it returns the reason instead, and Spark
evaluates the block then (:func:`select` returns None there).

Blocks taken: ``SELECT ... FROM t1 [CROSS | INNER] JOIN t2 [ON ...] ... [WHERE ...]`` over
plain tables joined by equalities between their columns (a block whose tables are not all
connected by equalities would be a cross product, whose size the change does not bound).
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import pyarrow as pa
from sqlglot import exp

from ivm.duckdb_database import SharedDatabase
from ivm.key_ranges import join_columns
from ivm.spark_types import NODE_TYPES, Columns, RefusedError, require, typed

__all__ = ["refusal", "run", "run_sql", "select"]

THREADS = 1
"""DuckDB threads of the local engine. A tick's terms are small by the engine rule
(:mod:`ivm.engine_rule`), and one thread spares each query the start of a thread pool
(measured: a 500-row filter in 1.4 ms on one thread, 6 ms on the default); concurrent
ticks each run on their own cursor."""

NO_REWRITES = "expression_rewriter"
"""DuckDB optimizers the local engine turns off: the expression rewriter moves constants
across comparisons (``x + 1 < 0`` becomes ``x < -1``), so an overflow Spark would wrap is
never computed, and DuckDB answers where it must stop (:mod:`ivm.spark_types`)."""

_DATABASE = SharedDatabase({"threads": THREADS, "disabled_optimizers": NO_REWRITES})
"""The process's database for the local engine (each query on a cursor of its own)."""


def refusal(query: exp.Select) -> str | None:
    """Why the local engine cannot take the block whatever its tables hold, or None.

    Checked before anything is read: :func:`select` may still fall back over the actual
    types and values (a decimal Spark would round, an integer overflow).
    """
    try:
        items = _tables(query)
        _require_connected(query, [item.alias_or_name for item in items])
    except RefusedError as error:
        return str(error)
    for expression in _expressions(query):
        for node in expression.walk():
            if not isinstance(node, (exp.Alias, *NODE_TYPES)):
                return f"{type(node).__name__} is not taken by the local engine"
            if isinstance(node, exp.Cast) and not _date_literal(node):
                return f"{node.sql('spark')}: a cast other than DATE '...'"
            if isinstance(node, exp.Interval) and not _date_literal(node.parent, node):
                return f"{node.sql('spark')}: an interval added to other than a date literal"
    return None


def _date_literal(node: exp.Expr | None, interval: exp.Interval | None = None) -> bool:
    """Whether ``node`` is ``DATE '...'``, or a date literal shifted by ``interval``.

    The guard's rules for casts and intervals (:mod:`ivm.spark_types`), checked on the
    SQL alone: other casts and interval arithmetic would fall back at every tick.
    """
    if interval is not None:
        if not isinstance(node, (exp.Add, exp.Sub)) or node.expression is not interval:
            return False
        node = node.this
    return (isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.DATE)
            and isinstance(node.this, exp.Literal) and node.this.is_string)


def select(query: exp.Select, tables: Mapping[str, pa.Table]) -> pa.Table | None:
    """The rows of the block as :func:`run` computes them, or None where it gives a reason."""
    rows = run(query, tables)
    return None if isinstance(rows, str) else rows


def run(query: exp.Select, tables: Mapping[str, pa.Table]) -> pa.Table | str:
    """The rows of the block, computed by DuckDB as Spark would compute them.

    Args:
        query: A qualified SELECT of an inner-join block (no grouping, ordering or
            DISTINCT) whose outputs have names (aliases or columns).
        tables: The Arrow table each relation name of the FROM clause reads, e.g. a change
            feed (its columns plus ``_weight`` int64) or a source's rows.

    Returns:
        One column per output, named as the output, typed as Spark types it (decimals as
        ``decimal128``; a column read as is keeps its Arrow type, e.g. a dictionary of
        strings where Spark has a string); else why Spark must evaluate it: the block or one
        of its types is outside the subset of :mod:`ivm.spark_types`, its tables are not
        connected by equalities, or DuckDB stopped on a value (an overflow Spark wraps or
        makes NULL).
    """
    try:
        rewritten, types = _rewritten(query, tables)
    except RefusedError as error:
        return str(error)
    try:
        rows = _query(rewritten.sql("duckdb"),
                      {item.name: tables[item.name] for item in _tables(query)})
    except duckdb.Error as error:
        return f"a value Spark computes otherwise ({type(error).__name__})"
    names = [s.alias_or_name for s in query.selects]
    try:
        arrays = [rows.column(i).cast(data_type) for i, data_type in enumerate(types)]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return "an output outside the type Spark gives it"
    return pa.Table.from_arrays(arrays, names=names)


def run_sql(sql: str, tables: Mapping[str, pa.Table]) -> pa.Table | str:
    """Run DuckDB ``sql`` whose every expression is typed as Spark types it, over ``tables``.

    For SQL the caller wrote in Spark's types (casts to the type of Spark's ``SUM``, say),
    where DuckDB stopping on a value is the only way its answer could differ from Spark's.

    Args:
        sql: A DuckDB query reading the relations named in ``tables``.
        tables: The Arrow table each relation name reads.

    Returns:
        The query's rows; or, when DuckDB stopped on a value (an overflow Spark would wrap
        or make NULL), why Spark must compute them.
    """
    try:
        return _query(sql, tables)
    except duckdb.DataError as error:  # a conversion or an arithmetic overflow
        return f"a value Spark computes otherwise ({type(error).__name__})"


def _query(sql: str, tables: Mapping[str, pa.Table]) -> pa.Table:
    """``sql`` run on a cursor of its own, each of ``tables`` registered under its name."""
    cursor = _DATABASE.cursor()
    try:
        for name, table in tables.items():
            cursor.register(name, table)
        return cursor.sql(sql).to_arrow_table()
    finally:
        cursor.close()


def _rewritten(query: exp.Select, tables: Mapping[str, pa.Table]
               ) -> tuple[exp.Select, list[pa.DataType]]:
    """The block with every expression rewritten for DuckDB, and Spark's output types."""
    items = _tables(query)
    columns = _columns(items, tables)
    _require_connected(query, [item.alias_or_name for item in items])
    outputs = [typed(_unaliased(s), columns) for s in query.selects]
    rewritten = exp.Select(expressions=[exp.alias_(o.sql, s.alias_or_name, quoted=True)
                                        for o, s in zip(outputs, query.selects, strict=True)])
    source = "from_" if query.args.get("from_") is not None else "from"
    rewritten.set(source, query.args[source].copy())  # built anew: a copy of the whole
    joins = []                                         # query costs more than DuckDB's run
    for join in query.args.get("joins") or []:
        on = join.args.get("on")
        joins.append(exp.Join(this=join.this.copy(), kind=join.args.get("kind"),
                              on=_condition(on, columns) if on is not None else None))
    rewritten.set("joins", joins)
    where = query.args.get("where")
    if where is not None:
        rewritten.set("where", exp.Where(this=_condition(where.this, columns)))
    return rewritten, [o.type for o in outputs]


def _condition(node: exp.Expr, columns: Columns) -> exp.Expr:
    result = typed(node, columns)
    require(pa.types.is_boolean(result.type), "{} is not boolean", node)
    return result.sql


def _tables(query: exp.Select) -> list[exp.Table]:
    """The block's tables, when it is a plain inner-join block (else RefusedError)."""
    clauses = {name for name, value in query.args.items() if value}
    require(clauses <= {"expressions", "from_", "from", "joins", "where"},
            f"clauses {sorted(clauses)} of more than an inner-join block")
    source = query.args.get("from_") or query.args.get("from")
    if source is None:
        raise RefusedError("no FROM")
    items = [source.this]
    for join in query.args.get("joins") or []:
        parts = {name for name, value in join.args.items() if value}
        require(parts <= {"this", "on", "kind"} and join.kind in ("", "CROSS", "INNER"),
                "{} is not an inner join", join)
        items.append(join.this)
    for item in items:
        require(isinstance(item, exp.Table)
                and {n for n, v in item.args.items() if v} <= {"this", "alias", "db", "catalog"},
                "{} is not a plain table", item)
    return items


def _columns(items: list[exp.Table], tables: Mapping[str, pa.Table]) -> Columns:
    """The type of every column of the block's tables, by (alias, column) in lower case."""
    columns: dict[tuple[str, str], pa.DataType] = {}
    aliases = set()
    for item in items:
        require(item.name in tables, "{} is not a given table", item)
        alias = item.alias_or_name.lower()
        require(alias not in aliases, f"alias {alias} twice")
        aliases.add(alias)
        names = [name.lower() for name in tables[item.name].column_names]
        require(len(set(names)) == len(names), f"columns of {alias} differ only by case")
        columns |= {(alias, name): field.type
                    for name, field in zip(names, tables[item.name].schema, strict=True)}
    return columns


def _require_connected(query: exp.Select, aliases: list[str]) -> None:
    """Refuse a block whose tables are not all connected by equalities (a cross product)."""
    reached, frontier = {aliases[0]}, [aliases[0]]
    while frontier:
        alias = frontier.pop()
        for _, theirs in join_columns(query, alias):
            if theirs.table not in reached:
                reached.add(theirs.table)
                frontier.append(theirs.table)
    require(reached >= set(aliases), "tables not all joined by equalities (a cross product)")


def _expressions(query: exp.Select) -> list[exp.Expr]:
    where = query.args.get("where")
    conditions = [j.args.get("on") for j in query.args.get("joins") or []]
    return [*query.selects, *(c for c in conditions if c is not None),
            *([where.this] if where is not None else [])]


def _unaliased(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node
