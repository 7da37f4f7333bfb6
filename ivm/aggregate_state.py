"""The invertible-aggregate law on aggregate state, written once over one engine interface.

State rows (one per group): ``__g0..`` the grouping values, ``__s<j>`` the sum of the
j-th argument's non-null values (in the type of Spark's ``SUM``; 0 when none),
``__c<j>`` their count (bigint) and ``__n`` the group's row count (bigint). A tick adds
the partial aggregate of the block's input delta (the *change*, one row per affected
group) to the state of the affected groups (:func:`advance`); the view's rows of those
groups before (weight -1) and after (+1) are the view's delta. Sums and counts form a
Z-set of partial aggregates, so a state stored as an older state plus the changes since
reads back exactly (:func:`with_changes`).

The law runs on :class:`StateEngine`, which has two implementations, one per place a
state's rows can be held: Spark DataFrames (:class:`ivm.state_spark.SparkStateEngine`,
the distributed engine) and Arrow tables on the driver advanced by DuckDB
(:class:`ivm.state_local.LocalStateEngine`). Where a state is held picks its engine, in
one place (:func:`engine_of`); :mod:`ivm.evaluate` decides where a state is held.

Source: Budiu et al., *DBSP: Automatic Incremental View Maintenance for Rich Query
Languages*, VLDB 2023, section 4 (linear aggregates: the aggregate of a delta added to
the kept aggregate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import pyarrow as pa

from ivm.aggregate_form import SUM_PREFIX, AggregateForm, decimal_parts, sum_type
from ivm.errors import IvmError, SumOverflowError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from ivm.engine_rule import Engine

Rows = TypeVar("Rows")


class StateEngine(Protocol[Rows]):
    """The operations the invertible-aggregate law runs on state rows, on one engine.

    ``Rows`` is how the engine holds rows: a Spark DataFrame, or an Arrow table on the
    driver. An operation that the engine cannot compute as Spark would (a sum DuckDB
    stops on where Spark wraps a bigint or makes a decimal NULL) answers why, as a
    string; Spark's own operations never do.
    """

    name: Engine
    """The engine's name in a tick's result: ``spark`` or ``local``."""

    def partial(self, form: AggregateForm, delta: Rows, arg_types: Sequence[str]
                ) -> Rows | str:
        """The partial aggregate of ``delta`` (``__g*``, ``__a*``, ``_weight``): state rows.

        One row per group with a row of nonzero weight (on Spark, a global aggregate's
        one row whatever the delta); a sum in the type of Spark's ``SUM`` of its argument
        (``arg_types``), counts weighted.
        """
        ...

    def split(self, state: Rows, change: Rows) -> tuple[Rows, Rows]:
        """The state rows whose group occurs in ``change`` (NULL matches NULL), and the rest."""
        ...

    def summed(self, parts: Sequence[Rows]) -> Rows | str:
        """State rows of ``parts`` added up group by group, in the types of ``parts[0]``.

        On Spark a sum is NULL when one of its parts' is (Spark's ``SUM`` overflowed);
        the local engine answers why it cannot add them instead.
        """
        ...

    def nonempty(self, rows: Rows) -> Rows:
        """``rows`` without the groups whose row count is 0.

        The one group of a global aggregate (no ``__g*`` column) stays at any count.
        """
        ...

    def union(self, first: Rows, second: Rows) -> Rows:
        """The rows of both (same columns)."""
        ...

    def settled(self, rows: Rows) -> Rows:
        """``rows`` computed once, so that later reads do not compute them again."""
        ...

    def settled_nulls(self, rows: Rows, names: Sequence[str]) -> tuple[Rows, list[bool]]:
        """:meth:`settled` ``rows``, and whether each column of ``names`` holds a NULL.

        The NULLs are found while the rows are computed (on Spark, by the same action).
        """
        ...


@dataclass(frozen=True)
class AggregateState:
    """The aggregate state of one view at one frontier.

    Held on Spark (``rows``) or on the driver (``table``): exactly one of the two is set.

    Attributes:
        arg_types: The Spark type of each argument, which fixes the state's types.
        rows: State rows (``__g*``, ``__s*``, ``__c*``, ``__n``) on Spark, checkpointed:
            their lineage does not reach the change feeds they were computed from.
        table: The same state rows as an Arrow table on the driver.
        schema: The view's columns as Spark types them, when known (a state held on the
            driver keeps it, so that a tick computed from it needs no Spark analysis).
        change: The partial aggregate the tick added to the previous state to give this
            one (state columns, one row per affected group; held as the state is); None
            for a state aggregated whole. A store keeps it instead of the whole state.
    """

    arg_types: tuple[str, ...]
    rows: DataFrame | None = None
    table: pa.Table | None = None
    schema: StructType | None = None
    change: DataFrame | pa.Table | None = None

    @property
    def held(self) -> DataFrame | pa.Table:
        """The state rows, wherever they are held."""
        held = self.table if self.table is not None else self.rows
        assert held is not None, "an aggregate state holds its rows on Spark or the driver"
        return held


@dataclass(frozen=True)
class Advanced(Generic[Rows]):
    """One tick of an aggregate: the affected groups' state before and after.

    Attributes:
        state: The whole state after the tick.
        before: State rows of the affected groups before the tick (present ones only).
        after: State rows of the affected groups after the tick (``__n`` may be 0).
        change: The partial aggregate that was added.
    """

    state: Rows
    before: Rows
    after: Rows
    change: Rows


def engine_of(state: DataFrame | pa.Table) -> StateEngine:
    """The engine of state rows: the local engine for an Arrow table, else Spark.

    The one place the law's engine is chosen: where the rows are held decides it (the
    driver's Arrow tables are advanced in process, Spark's DataFrames on the cluster).
    """
    if isinstance(state, pa.Table):
        from ivm.state_local import LOCAL_STATE_ENGINE
        return LOCAL_STATE_ENGINE
    from ivm.state_spark import SPARK_STATE_ENGINE
    return SPARK_STATE_ENGINE


def advance(engine: StateEngine[Rows], form: AggregateForm, arg_types: Sequence[str],
            state: Rows, change: Rows) -> Advanced[Rows] | str:
    """Add the partial aggregate ``change`` to ``state``: the law's step.

    Args:
        engine: The engine holding ``state`` and ``change``.
        form: The aggregate block.
        arg_types: The Spark type of each argument.
        state: The state rows at the old frontier.
        change: The input delta's partial aggregate (:meth:`StateEngine.partial`).

    Returns:
        The state at the new frontier, the affected groups before and after; or why
        ``engine`` cannot add them as Spark would (then Spark must hold the state).

    Raises:
        SumOverflowError: An affected group's decimal sum overflows its type.
    """
    change = engine.settled(change)
    before, untouched = engine.split(state, change)
    after = engine.summed([before, change])
    if isinstance(after, str):
        return after
    after = settled_checked(engine, form, arg_types, after)
    rows = engine.settled(engine.union(untouched, engine.nonempty(after)))
    return Advanced(rows, before, after, change)


def with_changes(engine: StateEngine[Rows], state: Rows, changes: Sequence[Rows]) -> Rows:
    """``state`` plus the partial aggregates ``changes``: the state they lead to.

    A group whose row count reaches 0 leaves the state, except the one group of a global
    aggregate (no ``__g*`` column).

    Raises:
        IvmError: ``engine`` cannot add them as Spark would (a sum past its type).
    """
    if not changes:
        return state
    rows = engine.summed([state, *changes])
    if isinstance(rows, str):
        raise IvmError(f"the stored aggregate state cannot be added up on the {engine.name} "
                       f"engine: {rows}")
    return engine.nonempty(rows)


def settled_checked(engine: StateEngine[Rows], form: AggregateForm, arg_types: Sequence[str],
                    rows: Rows) -> Rows:
    """State ``rows`` settled (:meth:`StateEngine.settled`), once no sum of theirs overflowed.

    An overflowed sum is one Spark's ``SUM`` made NULL. Only sums whose type Spark caps at
    38 digits (arguments of more than 28) are checked: any other decimal sum,
    ``decimal(p + 10, s)``, reaches its range only past 10^10 rows at the argument type's
    largest magnitude. A bigint sum wraps as Spark's does. The check runs while the rows
    settle (on Spark, no action of its own).

    Raises:
        SumOverflowError: A checked sum is NULL, naming the argument.
    """
    capped = [j for j, t in enumerate(arg_types)
              if form.summed[j] and (decimal_parts(t)[0] or 0) > 38 - 10]
    if not capped:
        return engine.settled(rows)
    rows, nulls = engine.settled_nulls(rows, [f"{SUM_PREFIX}{j}" for j in capped])
    for j, null in zip(capped, nulls, strict=True):
        if null:
            raise SumOverflowError(f"a SUM overflows {sum_type(arg_types[j])} in a group, "
                                   "which Spark makes NULL", fragment=form.args[j].sql("spark"))
    return rows
