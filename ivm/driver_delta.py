"""The delta of an inner-join block's rows, computed on the driver in Arrow.

Each delta term of the block (:func:`ivm.rewrite.delta_term`: the changed table's
change feed joined with the other tables at the new or old snapshot) is evaluated by
:mod:`ivm.local_engine` (DuckDB) over Arrow tables: the change feed as the source gave it, and each
partner read by its source on the driver, restricted to the join keys of the change or
of the partners read before it (the rows the term's equi-joins can match, or a
superset). Small changes to views over large sources thus run no Spark job, as long as
the restricted partners are small: a source declines a read of more than ``max_rows``
rows, and Spark evaluates the block then.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ivm import local_engine
from ivm.change_keys import arrow_keys
from ivm.key_ranges import KeyValues, comparable, join_columns
from ivm.rewrite import Relation, delta_term
from ivm.shape import block_tables, derived_tables
from ivm.zset import WEIGHT

ArrowRead = Callable[[str, Sequence[str], Mapping[str, KeyValues], int], pa.Table | None]
"""Reads a source on the driver: ``(role, columns, keys, max_rows)`` to the source's rows
at ``role`` (``new`` or ``old``), those ``columns`` (names as the SQL writes them, matched
case-insensitively), at least every row whose columns in ``keys`` lie in their bounds and
lists; None when more than ``max_rows`` rows would be read, or the source cannot."""

DRIVER_READ_MAX_ROWS = 10_000_000
"""Most rows one partner read may scan on the driver, in the data files left after pruning,
unless the caller sets another limit (``maintain``'s ``driver_read_max_rows``; the
refresher's follows its column cache, ``lakehouse.config.Config.driver_read_max_rows``).

A read decodes the key columns of those files and the other columns only at matching
rows, so this bounds its work, not its memory. Measured on TPC-H SF 1 (6M lineitem
rows): a 250-order delete's Q3 and Q5 refreshes take 0.4-0.5 s on the driver, with the
columns kept decoded between ticks, against 2.7-3.6 s for the same delta terms on Spark."""

EMPTY = pa.table({})
"""The delta of a block whose terms all join nothing (no column: the caller types it)."""


def block_delta(query: exp.Select, changes: Mapping[str, pa.Table],
                readers: Mapping[str, ArrowRead | None], relation: Relation,
                max_rows: int = DRIVER_READ_MAX_ROWS) -> pa.Table | str:
    """The delta of the block's rows: the union of its delta terms, in Arrow.

    The terms telescope in :func:`telescoping_order`, so that partners are read at
    the snapshot where their own change's rows are not.

    Args:
        query: A qualified inner-join SELECT (no grouping).
        changes: The change feed (columns plus ``_weight``) of each changed source.
        readers: How to read each source on the driver (None: it cannot be).
        relation: Names a source's relation at a role, as the terms name them.
        max_rows: Passed to every read.

    Returns:
        The block's outputs plus ``_weight`` (not consolidated); :data:`EMPTY` when every
        term joins nothing (checked without reading partners); else why Spark must
        evaluate the block: it is outside the local engine's subset
        (:mod:`ivm.spark_types`), a table is a derived table or read twice, or a partner
        read declines.
    """
    refused = block_refusal(query)
    if refused is not None:
        return refused  # checked before any partner is read
    names = [t.name for t in block_tables(query)]
    order = telescoping_order(names, changes)
    parts = []
    for position, table in enumerate(block_tables(query)):
        if table.name not in changes:
            continue
        part = _term(query, position, order, changes, readers, relation, max_rows)
        if isinstance(part, str):
            return part
        if part is not EMPTY:
            parts.append(part)
    if not parts:
        return EMPTY
    try:
        return pa.concat_tables(parts, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return "the delta terms' column types differ"


def block_refusal(query: exp.Select) -> str | None:
    """Why the block cannot run on the local engine whatever it reads, or None."""
    names = [t.name for t in block_tables(query)]
    if derived_tables(query):
        return "a derived table in the block"
    if len(set(names)) != len(names):
        return "a table read twice in the block"
    return local_engine.refusal(query)


def telescoping_order(names: Sequence[str], changes: Mapping[str, pa.Table]) -> list[int]:
    """The order of the block's tables for its delta terms: by net weight of their change.

    A term reads the tables before its changed one at the new snapshot, those after it
    at the old. A table whose change mostly removes rows comes first, so the other terms
    read it after the removal; one whose change mostly adds rows comes last, so they read
    it before the addition. Either way a partner read restricted to the change's keys
    finds fewer rows: after orders are deleted with their line items, the orders' term
    reads no line item. (Which snapshot a term reads does not change the delta: the sum
    telescopes in any order.)

    Args:
        names: The block's source names, by position.
        changes: The change feeds (with ``_weight``) of the changed sources.

    Returns:
        Positions, ascending by the net weight of their change (unchanged tables: 0);
        ties keep the query's order.
    """
    def net_weight(position: int) -> int:
        change = changes.get(names[position])
        if change is None or change.num_rows == 0:
            return 0
        return int(pc.sum(change.column(WEIGHT)).as_py() or 0)

    return sorted(range(len(names)), key=net_weight)


def _term(query: exp.Select, position: int, order: Sequence[int],
          changes: Mapping[str, pa.Table], readers: Mapping[str, ArrowRead | None],
          relation: Relation, max_rows: int) -> pa.Table | str:
    """One delta term, its partners read restricted to the join keys of known rows.

    A term whose change has no row, or no non-null value of a join key, joins nothing:
    it is empty without reading its partners; so is one whose restricted partner has no
    row (the partners after it are not read). The term is evaluated as it is, without
    :func:`ivm.key_ranges.restricted`'s conditions: its equi-joins imply them, and the
    reads already applied them.
    """
    tables = block_tables(query)
    changed = tables[position]
    change = changes[changed.name]
    if change.num_rows == 0:
        return EMPTY
    term = delta_term(query, position, relation, order)
    rank = {table: index for index, table in enumerate(order)}
    known = {changed.alias_or_name: change}
    relations = {relation("delta", changed.name): change}
    for other in read_order(query, position, changes):
        table = tables[other]
        keys = restriction(query, table.alias_or_name, known)
        read = readers.get(table.name)
        if keys is None:
            return EMPTY
        if read is None:
            return f"{table.name} cannot be read on the driver"
        role = "new" if rank[other] < rank[position] else "old"
        rows = read(role, read_columns(term, table.alias_or_name), keys, max_rows)
        if rows is None:
            return f"a read of {table.name} restricted to the change's keys spans more than " \
                   f"{max_rows:,} rows"
        if rows.num_rows == 0:
            return EMPTY
        known[table.alias_or_name] = relations[relation(role, table.name)] = rows
    return local_engine.run(term, relations)


def read_order(query: exp.Select, position: int, changes: Collection[str]) -> list[int]:
    """The other tables' positions, those joined to tables already read first.

    Breadth first over the block's equi-joins from the changed table, so that each
    partner is read restricted by the keys of the change or of partners read before it
    (a semi-join reduction: Bernstein and Chiu, "Using Semi-Joins to Solve Relational
    Queries", JACM 1981); tables joined to none of them come last, in the query's order.
    Among the tables joined to those read, changed ones (names in ``changes``) come
    first: the term reads them on the other side of their own change (see
    :func:`telescoping_order`), where the rows changed together with this term's (an
    order's line items, deleted with it) are not, so they often match nothing and end
    the term before the others are read.
    """
    tables = block_tables(query)
    aliases = [t.alias_or_name for t in tables]
    done, out = {aliases[position]}, list[int]()
    while len(out) < len(tables) - 1:
        linked = [i for i, alias in enumerate(aliases) if alias not in done
                  and any(theirs.table in done for _, theirs in join_columns(query, alias))]
        linked.sort(key=lambda i: tables[i].name not in changes)  # stable: query order
        following = linked[0] if linked else next(
            i for i, alias in enumerate(aliases) if alias not in done)
        done.add(aliases[following])
        out.append(following)
    return out


def restriction(query: exp.Select, alias: str, known: Mapping[str, pa.Table]
                 ) -> dict[str, KeyValues] | None:
    """The keys to read table ``alias`` with: the values of known rows it equi-joins with.

    By column of ``alias``; when several known tables restrict one column, the one
    listing the fewest values.

    Returns:
        The restriction (empty: read every row); None when a known relation has no
        non-null value of a joined column, so the term joins nothing.
    """
    found: dict[str, KeyValues] = {}
    for mine, theirs in join_columns(query, alias):
        rows = known.get(theirs.table)
        name = _column_name(rows, theirs.name) if rows is not None else None
        if rows is None or name is None or not comparable(theirs, mine):
            continue
        keys = arrow_keys(rows, [name], rows.num_rows)
        if keys is None:
            continue
        values = keys[name]
        if values.low is None:
            return None
        if mine.name not in found or _listed(values) < _listed(found[mine.name]):
            found[mine.name] = values
    return found


def _listed(values: KeyValues) -> float:
    """How many values a key lists (unlisted: unbounded)."""
    if values.values is None:
        return float("inf")
    return len(values.values)


def _column_name(rows: pa.Table, name: str) -> str | None:
    """The column of ``rows`` named ``name`` case-insensitively (as a read names it)."""
    return next((c for c in rows.column_names if c.lower() == name.lower()), None)


def read_columns(query: exp.Select, alias: str) -> list[str]:
    """The columns of table ``alias`` that the query reads."""
    return sorted({c.name for c in query.find_all(exp.Column) if c.table == alias})
