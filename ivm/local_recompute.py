"""Affected-key recompute of an aggregate block on the local engine.

A view that groups a block of filters, projections and inner joins with an aggregate the
invertible law does not keep (``MIN``, ``MAX``, ``AVG`` of doubles), a ``HAVING`` or an
output computed from aggregates is maintained by recomputing the groups its change touches
(:data:`ivm.laws.Law.AFFECTED_KEY_RECOMPUTE`): the block's output for those keys at the
new snapshot (+1) minus the same at the old (-1). When the change and the rows of those
groups are small, this runs in process and no Spark job:

1. the affected keys are the grouping values of the block's delta
   (:func:`ivm.driver_delta.block_delta` over the block projected to its keys);
2. at each snapshot every table is read on the driver restricted to the rows those
   groups can hold: its own grouping columns to the affected values, its join columns to
   the values of the tables read before it (a semi-join reduction,
   :func:`ivm.driver_delta.read_order`); a read of more than ``max_rows`` rows declines;
3. the block's grouping values and aggregate arguments are computed by the local engine
   (:func:`ivm.local_engine.run`, in Spark's types); the groups of the affected keys are
   aggregated by DuckDB in the types of Spark's aggregates (:func:`_aggregate`); and the
   outputs and ``HAVING`` computed from them by the local engine again.

Sums and averages of doubles depend on the order of addition in both engines (Spark's
answer differs between two runs of the same query over other partitions); they agree to
rounding, not bit for bit. Every other output is exact. Not taken here (Spark recomputes
the groups): ``AVG`` of decimals (rounded as Spark's ``Divide``, where DuckDB divides as
doubles), a decimal ``SUM`` whose values' magnitudes add up to half the 38-digit range
(DuckDB 1.5 adds the partial sums of separate chunks without an overflow check; a bound is
computed beside each sum), ``DISTINCT`` inside an aggregate other than ``COUNT(DISTINCT
x)``, distinct or grouping values in floating point (Spark makes NaN equal to NaN and -0.0
equal to 0.0 there), grouping sets, windows, outer joins, derived tables and tables whose
rows are only counted. The outputs and ``HAVING`` may be any expressions over the grouping
values and the aggregates in the local engine's subset (:mod:`ivm.spark_types`); they are
computed per group, after the aggregates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ivm import local_engine
from ivm.change_keys import arrow_keys
from ivm.driver_delta import (
    EMPTY,
    ArrowRead,
    block_delta,
    block_refusal,
    read_columns,
    read_order,
    restriction,
)
from ivm.key_ranges import KeyValues
from ivm.rewrite import Relation, substitute
from ivm.shape import block_tables, group_expressions, has_grouping_sets, outer_join, windows
from ivm.state_local import bound_name, bound_sql, bounded, sum_limit
from ivm.zset import WEIGHT

__all__ = ["GroupedBlock", "grouped_block", "recompute_delta"]

KEY_PREFIX = "__k"
ARG_PREFIX = "__a"
VALUE_PREFIX = "__v"
"""Columns of the rows (``__k<i>`` grouping values, ``__a<j>`` aggregate arguments) and of
the groups (``__k<i>``, ``__v<m>`` aggregate values)."""
ONE = exp.alias_(exp.Literal.number(1), "__one")
"""What a block reading no grouping value or argument selects (a SELECT needs an output)."""
AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
FLOATING = (exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE)
AGGREGATED = "__agg"
"""The relation of the affected groups' grouping values and aggregates."""


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call of the query.

    Attributes:
        function: ``COUNT``, ``SUM``, ``AVG``, ``MIN`` or ``MAX``.
        arg: The position of its argument among the rows' ``__a<j>``; None for ``COUNT(*)``.
        distinct: ``COUNT(DISTINCT arg)``.
    """

    function: type[exp.AggFunc]
    arg: int | None
    distinct: bool = False


@dataclass(frozen=True)
class GroupedBlock:
    """A ``GROUP BY`` (or ``SELECT DISTINCT``) over a block, split for the local engine.

    Attributes:
        keys: The query's grouping expressions (none: one group).
        rows: The block computing ``__k<i>`` (each grouping expression) and ``__a<j>`` (each
            aggregate argument) per row: a plain block :func:`ivm.local_engine.run` takes.
        aggregates: The aggregate calls, computed per group as ``__v<m>``.
        outputs: The query's outputs and ``HAVING`` over the groups: a block reading
            relation ``__agg`` (``__k<i>`` and ``__v<m>``) that :func:`ivm.local_engine.run`
            takes.
    """

    keys: tuple[exp.Expr, ...]
    rows: exp.Select
    aggregates: tuple[Aggregate, ...]
    outputs: exp.Select

    @property
    def key_rows(self) -> exp.Select:
        """The block projected to its grouping values (a constant for one group)."""
        names = [f"{KEY_PREFIX}{i}" for i in range(len(self.keys))]
        keys = [s for s in self.rows.selects if s.alias_or_name in names]
        return self.rows.select(*(keys or [ONE.copy()]), append=False, copy=True)


def grouped_block(query: exp.Query) -> GroupedBlock | str:
    """The query split for a local affected-key recompute, or why it cannot be.

    Args:
        query: A view's qualified query.

    Returns:
        The split; or the reason, naming the construct at fault.
    """
    if not isinstance(query, exp.Select):
        return "not a single SELECT"
    keys = group_expressions(query)
    if keys is None:
        return "no grouping"
    clauses = {name for name, value in query.args.items() if value} - {
        "expressions", "from", "from_", "joins", "where", "group", "having"}
    if clauses - {"distinct"} or (query.args.get("group") and "distinct" in clauses):
        return f"clauses {sorted(clauses)} besides GROUP BY and HAVING"
    if has_grouping_sets(query) or windows(query) or outer_join(query) is not None:
        return "grouping sets, a window or an outer join"
    if any(_is_floating(k) for k in keys):
        return "a grouping value in floating point (Spark makes NaN equal to NaN there)"
    calls: list[exp.AggFunc] = []
    outputs = _over_groups(query, keys, calls)
    if isinstance(outputs, str):
        return outputs
    args: list[exp.Expr] = []
    aggregates = []
    for call in calls:
        aggregate = _aggregate_call(call, args)
        if isinstance(aggregate, str):
            return aggregate
        aggregates.append(aggregate)
    rows = _rows_block(query, keys, args)
    refused = block_refusal(rows) or local_engine.refusal(outputs)
    return refused or _unread_table(rows) or GroupedBlock(tuple(keys), rows, tuple(aggregates),
                                                          outputs)


def _unread_table(rows: exp.Select) -> str | None:
    """A table of the block none of whose columns it reads: DuckDB scans no zero-column table."""
    for table in block_tables(rows):
        if not read_columns(rows, table.alias_or_name):
            return f"{table.sql('spark')}: no column of it read (its rows only counted)"
    return None


def _rows_block(query: exp.Select, keys: Sequence[exp.Expr], args: Sequence[exp.Expr]
                ) -> exp.Select:
    """The block's FROM, joins and WHERE computing ``__k<i>`` and ``__a<j>`` per row."""
    rows = query.select(*[k.copy().as_(f"{KEY_PREFIX}{i}") for i, k in enumerate(keys)],
                        *[a.copy().as_(f"{ARG_PREFIX}{j}") for j, a in enumerate(args)],
                        append=False, copy=True)
    for clause in ("group", "distinct", "having"):
        rows.set(clause, None)
    if not rows.selects:
        rows = rows.select(ONE.copy(), copy=False)
    return rows


def _over_groups(query: exp.Select, keys: Sequence[exp.Expr], calls: list[exp.AggFunc]
                 ) -> exp.Select | str:
    """The outputs and ``HAVING`` as a block reading ``__agg``.

    Each grouping expression and aggregate call (added to ``calls``) is replaced by its
    column there; or the reason when a column is read outside them.
    """
    refused: list[str] = []

    def replaced(node: exp.Expr) -> exp.Expr:
        if node in keys:
            return exp.column(f"{KEY_PREFIX}{list(keys).index(node)}", table=AGGREGATED)
        if isinstance(node, exp.Filter | exp.Window):
            refused.append(f"{node.sql('spark')}: FILTER or a window over the groups")
        elif isinstance(node, exp.AggFunc):
            if node not in calls:
                calls.append(node)
            return exp.column(f"{VALUE_PREFIX}{calls.index(node)}", table=AGGREGATED)
        elif isinstance(node, exp.Column):
            refused.append(f"{node.sql('spark')}: a column outside the grouping")
        return node

    outputs = exp.select(*[s.transform(replaced) for s in query.selects]).from_(AGGREGATED)
    having = query.args.get("having")
    if having is not None:
        outputs = outputs.where(having.this.transform(replaced), copy=False)
    return refused[0] if refused else outputs


def _aggregate_call(node: exp.AggFunc, args: list[exp.Expr]) -> Aggregate | str:
    """``node`` as an aggregate of one plain argument (added to ``args``), or why not."""
    if not isinstance(node, AGGREGATES):
        return f"{node.sql('spark')}: an aggregate the local engine does not take"
    arg, distinct = node.this, isinstance(node.this, exp.Distinct)
    if distinct:
        if not isinstance(node, exp.Count) or len(arg.expressions) != 1:
            return f"{node.sql('spark')}: DISTINCT inside an aggregate other than COUNT(DISTINCT x)"
        arg = arg.expressions[0]
        if _is_floating(arg):
            return f"{node.sql('spark')}: distinct floating-point values (Spark makes NaN one)"
    if arg is None or isinstance(arg, exp.Star):
        return Aggregate(exp.Count, None) if isinstance(node, exp.Count) else (
            f"{node.sql('spark')}: an aggregate without an argument")
    if arg.find(exp.AggFunc, exp.Window) is not None or len(node.expressions) > 0:
        return f"{node.sql('spark')}: an aggregate of more than one plain argument"
    if isinstance(node, exp.Avg) and arg.type is not None and arg.type.is_type(
            exp.DataType.Type.DECIMAL):
        return f"{node.sql('spark')}: an average of decimals rounds as Spark's Divide"
    if arg not in args:
        args.append(arg)
    return Aggregate(type(node), args.index(arg), distinct)


def _is_floating(node: exp.Expr) -> bool:
    """Whether the SQL types ``node`` as a float or a double (unknown types are not)."""
    return node.type is not None and node.type.is_type(*FLOATING)


def recompute_delta(block: GroupedBlock, changes: Mapping[str, pa.Table],
                    readers: Mapping[str, ArrowRead | None], relation: Relation,
                    max_rows: int) -> pa.Table | str:
    """The query's delta: its affected groups at the new snapshot (+1) and the old (-1).

    Args:
        block: The split query.
        changes: The change feed (columns plus ``_weight``) of each changed source.
        readers: How to read each source on the driver (None: it cannot be).
        relation: Names a source's relation at a role.
        max_rows: Most rows one read may scan.

    Returns:
        The query's outputs (Spark's types) plus ``_weight`` (int64), not consolidated;
        :data:`ivm.driver_delta.EMPTY` when no group is affected; else why Spark must
        compute it (a read declines, a type or value outside the local engine's subset).
    """
    keys = block_delta(block.key_rows, changes, readers, relation, max_rows)
    if isinstance(keys, str) or keys is EMPTY:
        return keys
    affected = local_engine.run_sql(f"SELECT DISTINCT * EXCLUDE ({_quoted(WEIGHT)}) FROM keys",
                                    {"keys": keys})
    if isinstance(affected, str):
        return affected
    if any(pa.types.is_floating(f.type) or pa.types.is_nested(f.type) for f in affected.schema):
        return "a grouping value in floating point (Spark makes NaN equal to NaN) or nested"
    sides = []
    for role in ("new", "old"):
        rows = _rows(block, role, affected, readers, relation, max_rows)
        if isinstance(rows, str):
            return rows
        sides.append(rows)
    return _aggregated(block, sides, affected)


def _rows(block: GroupedBlock, role: str, affected: pa.Table,
          readers: Mapping[str, ArrowRead | None], relation: Relation, max_rows: int
          ) -> pa.Table | str | None:
    """The block's ``__k``/``__a`` rows at ``role``, at least those of the affected groups.

    Each table is read restricted to the affected values of its own grouping columns and to
    the join keys of the tables read before it, starting from the one with the most
    grouping columns.

    Args:
        block: The split query.
        role: ``new`` or ``old``.
        affected: The affected groups' ``__k<i>``.
        readers: How to read each source on the driver.
        relation: Names a source's relation at a role.
        max_rows: Most rows one read may scan.

    Returns:
        The rows; None when the block holds none of them; or why a read declined.
    """
    query = block.rows
    tables = block_tables(query)
    own = _own_restrictions(block, affected)
    start = max(range(len(tables)), key=lambda i: len(own.get(tables[i].alias_or_name, {})))
    known: dict[str, pa.Table] = {}
    relations = {}
    for position in [start, *read_order(query, start, ())]:
        table = tables[position]
        alias = table.alias_or_name
        joined = restriction(query, alias, known)
        read = readers.get(table.name)
        if joined is None:
            return None
        if read is None:
            return f"{table.name} cannot be read on the driver"
        rows = read(role, read_columns(query, alias), {**joined, **own.get(alias, {})}, max_rows)
        if rows is None:
            return (f"a read of {table.name} restricted to the affected groups declined "
                    f"(more than {max_rows:,} rows, or not readable on the driver)")
        if rows.num_rows == 0:
            return None
        known[alias] = relations[relation(role, table.name)] = rows
    return local_engine.run(substitute(query, lambda _, source: relation(role, source)),
                            relations)


def _own_restrictions(block: GroupedBlock, affected: pa.Table
                      ) -> dict[str, dict[str, KeyValues]]:
    """By table alias, its grouping columns restricted to the affected values.

    A column with a NULL among the affected values is not restricted (NULL is a group,
    and a read keeps the rows whose values lie in the bounds).
    """
    found: dict[str, dict[str, KeyValues]] = {}
    for i, key in enumerate(block.keys):
        name = f"{KEY_PREFIX}{i}"
        if not isinstance(key, exp.Column) or affected.column(name).null_count:
            continue
        values = arrow_keys(affected, [name])
        if values is not None:
            found.setdefault(key.table, {})[key.name] = values[name]
    return found


def _aggregated(block: GroupedBlock, sides: Sequence[pa.Table | None], affected: pa.Table
                ) -> pa.Table | str:
    """The affected groups' outputs at each side, weighted +1 (new) and -1 (old).

    Args:
        block: The split query.
        sides: Its rows (:func:`_rows`) at the new and the old snapshot; None: no row.
        affected: The affected groups' ``__k<i>``.

    Returns:
        The outputs plus ``_weight``; :data:`ivm.driver_delta.EMPTY` when neither side has
        a row; or why Spark must compute them.
    """
    present = [rows for rows in sides if rows is not None]
    if not present:
        return EMPTY
    schema = present[0].schema
    groups = _groups_sql(block, schema)
    if isinstance(groups, str):
        return groups
    sql, types, limits = groups
    parts = []
    for rows, weight in zip(sides, (1, -1), strict=True):
        found = bounded(local_engine.run_sql(sql, {
            "rows": rows if rows is not None else schema.empty_table(), "keys": affected}),
            limits)
        if isinstance(found, str):
            return found
        columns = [found.column(i).cast(t) for i, t in enumerate(types)]
        outputs = local_engine.run(block.outputs, {
            AGGREGATED: pa.Table.from_arrays(columns, names=found.column_names)})
        if isinstance(outputs, str):
            return outputs
        parts.append(outputs.append_column(WEIGHT, pa.array([weight] * outputs.num_rows,
                                                            pa.int64())))
    try:
        return pa.concat_tables(parts, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return "the two sides' column types differ"


def _groups_sql(block: GroupedBlock, schema: pa.Schema
                ) -> tuple[str, list[pa.DataType], dict[str, float]] | str:
    """DuckDB SQL of the affected groups' ``__k<i>`` and ``__v<m>`` over rows of ``schema``.

    Returns:
        The SQL (reading relations ``rows`` and ``keys``), Spark's type of each
        ``__k``/``__v`` column, and the limit of each magnitude bound the SQL computes after
        them (:func:`ivm.state_local.bound_sql`, of a decimal sum); or why an aggregate is
        not taken.
    """
    names = [f"{KEY_PREFIX}{i}" for i in range(len(block.keys))]
    selects = [f"r.{_quoted(n)}" for n in names]
    types = [_plain(schema.field(n).type) for n in names]
    bounds, limits = [], {}
    for m, call in enumerate(block.aggregates):
        arg = f"r.{_quoted(f'{ARG_PREFIX}{call.arg}')}" if call.arg is not None else ""
        arg_type = schema.field(f"{ARG_PREFIX}{call.arg}").type if call.arg is not None else None
        aggregate = _aggregate(call, arg, arg_type)
        if isinstance(aggregate, str):
            return aggregate
        selects.append(f"{aggregate[0]} AS {VALUE_PREFIX}{m}")
        types.append(aggregate[1])
        if call.function is exp.Sum and pa.types.is_decimal(aggregate[1]):
            bounds.append(bound_sql(arg, f"{VALUE_PREFIX}{m}"))
            limits[bound_name(f"{VALUE_PREFIX}{m}")] = sum_limit(aggregate[1])
    sql = (f"SELECT {', '.join(selects + bounds)} FROM rows AS r{_semi_join(names)}"
           f"{_group_by(names)}")
    return sql, types, limits


def _aggregate(call: Aggregate, arg: str, arg_type: pa.DataType | None
               ) -> tuple[str, pa.DataType] | str:
    """DuckDB SQL computing the aggregate as Spark 3.5 does, and Spark's type of it.

    ``COUNT`` is a bigint (of distinct values: not of floating point, where Spark makes
    every NaN one value and -0.0 equal to 0.0); ``SUM`` of integers a bigint (DuckDB stops
    where Spark would wrap), of decimals ``decimal(min(38, p + 10), s)``, of floating point
    a double;
    ``AVG`` of integers or floating point a double (Spark sums doubles); ``MIN`` and
    ``MAX`` keep the argument's type. Source: Spark 3.5 ``Sum``, ``Average``.
    """
    if arg_type is None:
        return "COUNT(*)", pa.int64()
    function, plain = call.function, _plain(arg_type)
    if call.distinct and (pa.types.is_floating(plain) or pa.types.is_nested(plain)):
        return f"COUNT(DISTINCT) of {plain}: distinct as Spark's, on Spark"
    if function is exp.Count:
        return f"COUNT({'DISTINCT ' if call.distinct else ''}{arg})", pa.int64()
    if function in (exp.Min, exp.Max):
        if pa.types.is_nested(plain) or pa.types.is_null(plain):
            return f"{function.__name__.upper()} of {plain}: not taken by the local engine"
        return f"{function.__name__.upper()}({arg})", plain
    if pa.types.is_floating(plain) or (pa.types.is_integer(plain) and function is exp.Avg):
        return f"{function.__name__.upper()}(CAST({arg} AS DOUBLE))", pa.float64()
    if pa.types.is_integer(plain):
        return f"CAST(SUM(CAST({arg} AS HUGEINT)) AS BIGINT)", pa.int64()
    if pa.types.is_decimal(plain) and function is exp.Sum:
        target = pa.decimal128(min(38, plain.precision + 10), plain.scale)
        return (f"CAST(SUM(CAST({arg} AS DECIMAL(38, {plain.scale}))) AS "
                f"DECIMAL({target.precision}, {target.scale}))"), target
    return f"{function.__name__.upper()} of {plain}: rounded as Spark's, on Spark"


def _plain(data_type: pa.DataType) -> pa.DataType:
    """The type of the values (a dictionary's value type)."""
    return data_type.value_type if pa.types.is_dictionary(data_type) else data_type


def _semi_join(names: Sequence[str]) -> str:
    if not names:
        return ""
    on = " AND ".join(f"r.{_quoted(n)} IS NOT DISTINCT FROM k.{_quoted(n)}" for n in names)
    return f" SEMI JOIN keys AS k ON {on}"


def _group_by(names: Sequence[str]) -> str:
    return f" GROUP BY {', '.join(f'r.{_quoted(n)}' for n in names)}" if names else ""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
