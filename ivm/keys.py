"""Unique keys: which columns identify a row of a view, of a block, or of a join.

A key comes from GROUP BY (the grouping columns), DISTINCT and UNION/INTERSECT/EXCEPT
(every output column), or from the sources' keys carried through filters, projections
and joins. Keys through joins follow from functional dependencies (Abiteboul, Hull and
Vianu, "Foundations of Databases", 1995, ch. 8): a source's key determines its whole row,
and an equality conjunct ``a.x = b.y`` between columns of one exact, non-floating type
makes each column determine the other. A set of columns is a key of a join when, closed
under these dependencies, it determines the row of every input. So ``A JOIN B ON A.fk =
B.pk`` keeps A's key (B's key is equated to A's columns), and two keyed inputs joined on
anything have the union of their keys.

Outer joins use only their own dependencies: each input's key, and the ON equalities in
the direction from the preserved side to the null-supplying side (an unmatched row gets
NULLs, which its preserved row determines too). WHERE equalities above an outer join are
not used.

A source key is a primary key: its columns are unique together (NULL-safe) and never
NULL. Keys are declared, not checked; a wrong key makes a keyed sink lose rows.

Pure functions over a qualified sqlglot tree whose columns carry types
(:func:`annotate`), in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from ivm.shape import (
    SET_OPERATIONS,
    block_items,
    group_expressions,
    is_union_all,
    join_kinds,
    outer_join,
)

SourceKeys = Mapping[str, Sequence[str]]
"""Source name -> the columns of its primary key, e.g. ``{"airlines": ["carrier"]}``."""

Attr = tuple[str, str]
"""A column of a block's input: ``(table alias, column)``; column ``*`` is the whole row."""

Dependency = tuple[frozenset[Attr], frozenset[Attr]]
"""A functional dependency ``lhs -> rhs``."""

ROW = "*"


def annotate(query: exp.Query, schemas: Mapping[str, Mapping[str, str]]) -> None:
    """Give every column of ``query`` its type, in place (unknown when it cannot be typed)."""
    try:
        annotate_types(query, schema={n: dict(c) for n, c in schemas.items()}, dialect="spark")
    except Exception:  # noqa: BLE001 - untyped columns only leave equalities unused
        pass


def output_key(query: exp.Query, source_keys: SourceKeys) -> tuple[str, ...] | None:
    """The output columns of ``query`` that identify its rows, or None.

    Args:
        query: A qualified query (CTEs inlined), typed by :func:`annotate`.
        source_keys: The primary key of each keyed source.

    Returns:
        Output column names in output order; ``()`` when the query has at most one row
        (an aggregate without GROUP BY); None when rows may repeat.
    """
    columns = tuple(p.alias_or_name for p in query.selects)
    if isinstance(query, SET_OPERATIONS):
        return None if is_union_all(query) or query.args.get("distinct") is False else columns
    if not isinstance(query, exp.Select):
        return None
    groups = group_expressions(query)
    if groups is not None:
        return _group_key(query, groups)
    inputs, dependencies = _dependencies(query, source_keys, with_where=True)
    if inputs is None:
        return None
    names: dict[Attr, str] = {}  # each input column under its first output name
    for select in query.selects:
        attr = _attr(select.unalias())
        if attr is not None:
            names.setdefault(attr, select.alias_or_name)
    chosen = _minimal(list(names), inputs, dependencies)
    return None if chosen is None else tuple(names[attr] for attr in chosen)


def block_key(query: exp.Select, source_keys: SourceKeys, *, with_where: bool,
              ) -> tuple[str, ...] | None:
    """A key of the block's joined rows (before grouping and projection), or None.

    Args:
        query: A qualified SELECT block, typed by :func:`annotate`.
        source_keys: The primary key of each keyed source.
        with_where: Use the WHERE clause's equalities too (the rows after the filter).

    Returns:
        Qualified column names such as ``f.carrier``, or None.
    """
    inputs, dependencies = _dependencies(query, source_keys, with_where=with_where)
    if inputs is None:
        return None
    keys = [(item.alias_or_name, column) for item in block_items(query)
            for column in item_key(item, source_keys) or ()]
    chosen = _minimal(keys, inputs, dependencies)
    return None if chosen is None else tuple(f"{t}.{c}" for t, c in chosen)


def item_key(item: exp.Expr, source_keys: SourceKeys) -> tuple[str, ...] | None:
    """The key of one FROM/JOIN item: a source's declared key or a derived table's key."""
    if isinstance(item, exp.Subquery):
        return output_key(item.this, source_keys)
    if isinstance(item, exp.Table):
        found = source_keys.get(item.name)
        return tuple(found) if found is not None else None
    return None


def _group_key(query: exp.Select, groups: list[exp.Expr]) -> tuple[str, ...] | None:
    names: list[str] = []
    for group in groups:
        match = [p.alias_or_name for p in query.selects if p.unalias() == group]
        if not match:
            return None
        names.append(match[0])
    return tuple(names)


def _dependencies(query: exp.Select, source_keys: SourceKeys, *, with_where: bool,
                  ) -> tuple[frozenset[Attr] | None, list[Dependency]]:
    """The rows of every input (``(alias, *)``) and the dependencies among their columns.

    Returns ``(None, [])`` when an input has no key (its rows may repeat).
    """
    dependencies: list[Dependency] = []
    inputs = set()
    for item in block_items(query):
        alias = item.alias_or_name
        key = item_key(item, source_keys)
        if key is None:
            return None, []
        dependencies.append((frozenset((alias, c) for c in key), frozenset({(alias, ROW)})))
        inputs.add((alias, ROW))
    outer = outer_join(query)
    if outer is not None:
        dependencies += _outer_dependencies(query)
        return frozenset(inputs), dependencies
    if any(k in {"LEFT", "RIGHT", "FULL", "SEMI", "ANTI"} for k in join_kinds(query)):
        return None, []
    conditions = [j.args.get("on") for j in query.args.get("joins") or []]
    where = query.args.get("where")
    if with_where and where is not None:
        conditions.append(where.this)
    for left, right in _equalities(conditions):
        dependencies += [(frozenset({left}), frozenset({right})),
                         (frozenset({right}), frozenset({left}))]
    return frozenset(inputs), dependencies


def _outer_dependencies(query: exp.Select) -> list[Dependency]:
    """ON equalities, from the preserved side to the null-supplying side (none for FULL)."""
    outer = outer_join(query)
    assert outer is not None
    if outer.side == "FULL":
        return []
    preserved = outer.left if outer.side == "LEFT" else outer.right
    found = []
    for left, right in _equalities([query.args["joins"][0].args.get("on")]):
        source, target = (left, right) if left[0] == preserved else (right, left)
        if source[0] == preserved and target[0] != preserved:
            found.append((frozenset({source}), frozenset({target})))
    return found


def _equalities(conditions: Iterable[exp.Expr | None]) -> list[tuple[Attr, Attr]]:
    """Top-level conjuncts ``a.x = b.y`` of one exact type: the values are identical."""
    pairs = []
    for condition in conditions:
        if condition is None:
            continue
        for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
            if not isinstance(conjunct, exp.EQ):
                continue
            left, right = _attr(conjunct.this), _attr(conjunct.expression)
            if left is not None and right is not None and _identical_when_equal(
                    conjunct.this, conjunct.expression):
                pairs.append((left, right))
    return pairs


def _identical_when_equal(a: exp.Expr, b: exp.Expr) -> bool:
    """Whether ``a = b`` implies equal values: same known type, not floating point.

    Across types Spark casts one side (``'01' = 1``), and ``0.0 = -0.0`` for doubles, so
    equal would not mean identical.
    """
    left, right = a.type, b.type
    if left is None or right is None or left.is_type(exp.DataType.Type.UNKNOWN):
        return False
    return left == right and not left.is_type(*exp.DataType.FLOAT_TYPES)


def _attr(node: exp.Expr) -> Attr | None:
    if isinstance(node, exp.Column) and node.table and isinstance(node.this, exp.Identifier):
        return node.table, node.name
    return None


def _closure(attrs: Iterable[Attr], dependencies: Sequence[Dependency]) -> set[Attr]:
    known = set(attrs)

    def holds(attr: Attr) -> bool:
        return attr in known or (attr[0], ROW) in known

    changed = True
    while changed:
        changed = False
        for lhs, rhs in dependencies:
            if all(holds(a) for a in lhs) and not all(holds(a) for a in rhs):
                known |= rhs
                changed = True
    return known


def _minimal(candidates: Sequence[Attr], inputs: frozenset[Attr],
             dependencies: Sequence[Dependency]) -> list[Attr] | None:
    """A minimal subset of ``candidates`` determining every input row, or None.

    Columns are dropped from the last to the first, so earlier columns are kept.
    """
    if not inputs <= _closure(candidates, dependencies):
        return None
    chosen = list(dict.fromkeys(candidates))
    for attr in reversed(list(chosen)):
        rest = [a for a in chosen if a != attr]
        if inputs <= _closure(rest, dependencies):
            chosen = rest
    return chosen
