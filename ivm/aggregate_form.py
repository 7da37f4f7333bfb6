"""Split a GROUP BY block into its input rows and an output over aggregate state.

The invertible-aggregate law keeps, per group, the sum and the count of every
aggregate argument plus the group's row count. A delta of the input changes that
state by addition (SUM and COUNT are group homomorphisms: Z-set weights add), so the
new state of a group is its old state plus the aggregate of the input delta, without
reading the input again. The view's outputs (SUM, AVG, COUNT, expressions over them,
HAVING) are then computed from the state of the affected groups.

Pure functions over sqlglot expressions. Sources: Gupta and Mumick, "Maintenance of
Materialized Views" (IEEE Data Eng. Bull. 1995), section on self-maintainable
aggregates; Budiu et al., "DBSP" (VLDB 2023), section 6 (linear aggregates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from ivm.shape import block_items, group_expressions, has_grouping_sets, windows

GROUP_PREFIX = "__g"
"""State column of the i-th grouping expression."""
SUM_PREFIX = "__s"
"""State column: SUM of the j-th argument's non-null values (0 when there are none)."""
COUNT_PREFIX = "__c"
"""State column: COUNT of the j-th argument's non-null values."""
ROWS = "__n"
"""State column: COUNT(*) of the group (the group exists while it is positive)."""
ARG_PREFIX = "__a"
"""Column of the j-th argument in the block's input rows."""

INVERTIBLE = (exp.Sum, exp.Avg, exp.Count)
"""The aggregates maintained by addition: SUM, AVG (as SUM / COUNT) and COUNT."""


@dataclass(frozen=True)
class AggregateForm:
    """A GROUP BY block in the shape the invertible-aggregate law maintains.

    Attributes:
        query: The qualified block.
        groups: The grouping expressions (empty: one global group).
        args: The distinct arguments of SUM, AVG and COUNT (``COUNT(*)`` has none).
        summed: For each argument, whether a SUM or AVG reads it (its sum is kept).
    """

    query: exp.Select
    groups: tuple[exp.Expr, ...]
    args: tuple[exp.Expr, ...]
    summed: tuple[bool, ...]

    @property
    def is_global(self) -> bool:
        """An aggregate without GROUP BY: exactly one output row, even over no input."""
        return not self.groups

    def rows(self) -> exp.Select:
        """The block's input rows: ``SELECT g AS __g0, ..., arg AS __a0, ... FROM ... WHERE ...``.

        The FROM, JOINs and WHERE of the block, without grouping: its delta is the
        input of the aggregate's delta.
        """
        rows = self.query.copy()
        for clause in ("group", "having", "order", "limit", "qualify", "distinct"):
            rows.set(clause, None)
        outputs = [g.copy().as_(f"{GROUP_PREFIX}{i}") for i, g in enumerate(self.groups)]
        outputs += [a.copy().as_(f"{ARG_PREFIX}{j}") for j, a in enumerate(self.args)]
        rows.set("expressions", outputs or [exp.Literal.number(1).as_("__one")])
        return rows


def aggregate_form(query: exp.Query) -> AggregateForm | None:
    """The block as an :class:`AggregateForm`, or None when the law does not apply.

    It applies to a SELECT that groups (GROUP BY, or aggregates without it) and whose
    every aggregate is a plain SUM, AVG or COUNT (no DISTINCT, no FILTER), with no
    window, no SELECT DISTINCT and no ROLLUP/CUBE/GROUPING SETS. Whether the argument
    types are exact (integers, decimals) is checked by :func:`exact_type`.
    """
    if not isinstance(query, exp.Select) or query.args.get("distinct") or windows(query):
        return None
    groups = group_expressions(query)
    if groups is None or has_grouping_sets(query):
        return None
    if not block_items(query):
        return None
    aggregates = _aggregates(query)
    if aggregates is None or not aggregates:
        return None
    args: list[exp.Expr] = []
    summed: list[bool] = []
    for aggregate in aggregates:
        arg = _argument(aggregate)
        if arg is None:
            continue
        index = _index(args, arg)
        if index is None:
            args.append(arg)
            summed.append(False)
            index = len(args) - 1
        summed[index] = summed[index] or not isinstance(aggregate, exp.Count)
    return AggregateForm(query, tuple(groups), tuple(args), tuple(summed))


def _aggregates(query: exp.Select) -> list[exp.AggFunc] | None:
    """Every aggregate of the outputs and HAVING; None if one is not invertible."""
    having = query.args.get("having")
    scopes: list[exp.Expr] = list(query.selects) + ([having] if having is not None else [])
    found: list[exp.AggFunc] = []
    for scope in scopes:
        for aggregate in scope.find_all(exp.AggFunc):
            if not isinstance(aggregate, INVERTIBLE) or _argument_is_distinct(aggregate):
                return None
            if isinstance(aggregate.parent, exp.Filter):
                return None
            found.append(aggregate)
    return found


def _argument_is_distinct(aggregate: exp.AggFunc) -> bool:
    return isinstance(aggregate.this, exp.Distinct)


def _argument(aggregate: exp.AggFunc) -> exp.Expr | None:
    """The argument of SUM/AVG/COUNT; None for ``COUNT(*)``."""
    arg = aggregate.this
    return None if arg is None or isinstance(arg, exp.Star) else arg


def _index(items: Sequence[exp.Expr], item: exp.Expr) -> int | None:
    return next((i for i, known in enumerate(items) if known == item), None)


def invertible(query: exp.Query, schemas: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether the invertible-aggregate law maintains ``query`` exactly.

    Its aggregates must be plain SUM, AVG and COUNT (:func:`aggregate_form`) and every
    argument of SUM and AVG must have an exact type (:func:`exact_type`), as sqlglot
    infers it from the sources' schemas. An argument whose type cannot be inferred is
    taken as inexact.
    """
    form = aggregate_form(query)
    if form is None:
        return False
    schema: dict[str, object] = {name: dict(columns) for name, columns in schemas.items()}
    typed = aggregate_form(annotate_types(query.copy(), schema=schema, dialect="spark"))
    assert typed is not None
    return all(_exact(arg.type) for arg, summed in zip(typed.args, typed.summed, strict=True)
               if summed)


def _exact(data_type: exp.DataType | None) -> bool:
    exact = (*exp.DataType.INTEGER_TYPES, exp.DataType.Type.DECIMAL)
    return data_type is not None and data_type.is_type(*exact)


def exact_type(spark_type: str) -> bool:
    """Whether sums of ``spark_type`` (a Spark simple type string) are exact.

    Integers and decimals add exactly, so their sums can be maintained by adding and
    subtracting deltas. Floating point addition is not associative: a maintained sum
    would drift from a recompute, so FLOAT and DOUBLE arguments are not invertible.
    """
    return spark_type in {"tinyint", "smallint", "int", "bigint"} or spark_type.startswith(
        "decimal")


def sum_type(spark_type: str) -> str:
    """Spark's result type of ``SUM`` over ``spark_type`` (an exact type).

    Source: Spark ``Sum.resultType``: integers give bigint, ``decimal(p, s)`` gives
    ``decimal(min(38, p + 10), s)``.
    """
    precision, scale = decimal_parts(spark_type)
    if precision is None:
        return "bigint"
    return f"decimal({min(38, precision + 10)},{scale})"


def decimal_parts(spark_type: str) -> tuple[int | None, int]:
    """Precision and scale of ``decimal(p, s)``; (None, 0) for other Spark types."""
    if not spark_type.startswith("decimal"):
        return None, 0
    inner = spark_type[spark_type.index("(") + 1:spark_type.index(")")]
    precision, scale = (int(part) for part in inner.split(","))
    return precision, scale


def state_output(form: AggregateForm, arg_types: Sequence[str], state: str) -> exp.Select:
    """The view's outputs computed from aggregate state rows.

    Every grouping expression is replaced by its state column, ``SUM(x)`` by the kept
    sum (NULL when the group has no non-null ``x``), ``COUNT(x)`` by the kept count,
    ``COUNT(*)`` by the row count and ``AVG(x)`` by sum / count with the result type
    and rounding of Spark's ``Average`` (decimal division of the sum in ``SUM``'s type
    by the count as ``decimal(20, 0)``, cast to ``decimal(p + 4, s + 4)``; double
    division for integers).

    Args:
        form: The aggregate block.
        arg_types: The Spark type of each argument (``form.args`` order), all exact.
        state: The relation holding state rows (``__g*``, ``__s*``, ``__c*``, ``__n``).

    Returns:
        ``SELECT <outputs> FROM state [WHERE __n > 0] [AND <HAVING>]``; groups whose
        last row was deleted (``__n = 0``) disappear, except the one global group.
    """
    def replace(node: exp.Expr) -> exp.Expr:
        for i, group in enumerate(form.groups):
            if node == group:
                return exp.column(f"{GROUP_PREFIX}{i}")
        if isinstance(node, INVERTIBLE):
            return _from_state(node, form, arg_types)
        return node

    outputs = [p.copy().transform(replace) for p in form.query.selects]
    select = exp.select(*outputs).from_(state)
    conditions: list[exp.Expr] = [] if form.is_global else [exp.column(ROWS) > 0]
    having = form.query.args.get("having")
    if having is not None:
        conditions.append(exp.paren(having.this.copy().transform(replace)))
    return select.where(exp.and_(*conditions)) if conditions else select


def _from_state(aggregate: exp.AggFunc, form: AggregateForm, arg_types: Sequence[str]
                ) -> exp.Expr:
    arg = _argument(aggregate)
    if arg is None:
        return exp.column(ROWS)
    j = _index(form.args, arg)
    assert j is not None
    count = exp.column(f"{COUNT_PREFIX}{j}")
    if isinstance(aggregate, exp.Count):
        return count
    total: exp.Expr = exp.column(f"{SUM_PREFIX}{j}")
    if isinstance(aggregate, exp.Avg):
        total = _average(total, count, arg_types[j])
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=count.copy(), expression=exp.Literal.number(0)),
                                true=exp.Null())], default=total)


def _average(total: exp.Expr, count: exp.Expr, arg_type: str) -> exp.Expr:
    """Spark's ``Average`` from its sum and count (``Average.evaluateExpression``)."""
    precision, scale = decimal_parts(arg_type)
    if precision is None:
        return exp.Div(this=exp.cast(total, "double"), expression=exp.cast(count, "double"))
    quotient = exp.Div(this=total, expression=exp.cast(count, "decimal(20,0)"))
    result = f"decimal({min(38, precision + 4)},{min(38, scale + 4)})"
    return exp.cast(exp.paren(quotient), result)
