"""What the tick needs from a source: versions, snapshots, row counts and the change feed."""

from __future__ import annotations

from collections.abc import (
    Callable,
    Collection,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from ivm import KeyValues


@dataclass(frozen=True)
class ChangeFeed:
    """A source's change between two versions, as a consolidated Z-set.

    Attributes:
        spark_rows: Returns :attr:`rows` (called once, when first read): a change
            computed in Arrow reaches Spark only if a Spark query reads it.
        arrow: The same rows as an Arrow table when the reader computed the change in
            Arrow; ``rows`` then reads a local file holding them, cheap to read again.
            None when Spark computes the change: ``rows`` is then a plan over the
            table's files, worth materializing once before it is read several times.
        checkpointed_rows: How many rows ``rows`` holds when it is already materialized
            on the executors (the reader checkpointed it to catch a failed read early,
            counting them in the same Spark action); None when it is not.
    """

    spark_rows: Callable[[], DataFrame]
    arrow: pa.Table | None = None
    checkpointed_rows: int | None = None

    @cached_property
    def rows(self) -> DataFrame:
        """The change in Spark: the table's columns (or those asked for) plus ``_weight``."""
        return self.spark_rows()

    @classmethod
    def of(cls, rows: DataFrame, arrow: pa.Table | None = None,
           checkpointed_rows: int | None = None) -> ChangeFeed:
        """A change whose Spark rows are already built."""
        return cls(lambda: rows, arrow, checkpointed_rows)

    @classmethod
    def empty(cls, rows: DataFrame) -> ChangeFeed:
        """No change: ``rows`` with no rows (the table's columns plus ``_weight``)."""
        frame = rows.limit(0)
        return cls.of(frame, to_arrow_schema(frame.schema).empty_table())


def projected(names: Sequence[str], columns: Collection[str] | None) -> list[str]:
    """The ``names`` (a table's columns, in order) that ``columns`` asks for.

    Matched case-insensitively, as Spark resolves names. All of ``names`` when
    ``columns`` is None or asks for a column the table lacks.
    """
    if columns is None:
        return list(names)
    wanted = {c.lower() for c in columns}
    kept = [n for n in names if n.lower() in wanted]
    return kept if len(kept) == len(wanted) else list(names)


class SourceReader(Protocol):
    """A versioned table read by Spark.

    Versions are Iceberg snapshot ids or Delta table versions (int). A version of
    None means "before the table had any data": its snapshot is empty.
    """

    name: str

    def current_version(self) -> int | None:
        """The newest committed version, or None when the table has none yet."""
        ...

    def pinned(self) -> AbstractContextManager[None]:
        """Within, the reader reads the table's current metadata once (a tick's view of it)."""
        ...

    def snapshot(self, version: int | None) -> DataFrame:
        """The table's rows at ``version`` (empty, with the current schema, for None)."""
        ...

    def schema_key(self, version: int) -> Hashable:
        """A value equal for two versions exactly when the table's schema is the same.

        Read from metadata: a tick keys the view's analysed schema by it instead of
        resolving the snapshot in Spark (``ivm.SourceInput.schema_key``).
        """
        ...

    def change_feed(self, old: int | None, new: int,
                    columns: Collection[str] | None = None, *,
                    in_arrow: bool = True) -> ChangeFeed:
        """The change from ``old`` (exclusive) to ``new`` (inclusive) as a Z-set.

        Only ``columns`` are read when given (and all are the table's): a view reads
        the change projected onto the columns it uses. With ``in_arrow`` False (engine
        ``spark``) no row is read on the driver: Spark computes the change.
        """
        ...

    def arrow_rows(self, version: int, columns: Sequence[str],
                   keys: Mapping[str, KeyValues], max_rows: int) -> pa.Table | None:
        """The rows at ``version`` whose ``keys`` columns lie in their bounds, in Arrow.

        Read on the driver (a join view's partners for a small change), ``columns`` only
        (matched case-insensitively); a superset of the matching rows is allowed. None
        when more than ``max_rows`` rows would be read, or the reader cannot read here.
        """
        ...

    def row_count(self, version: int) -> int:
        """The table's rows at ``version``, from metadata alone (no Spark job, no data read).

        The ``auto`` refresh policy compares the change feed's rows with it. Exact for
        appends, deletes and rewrites; an upper bound where deletes are recorded in a way
        the metadata cannot count (Iceberg equality deletes, Delta deletion vectors).
        """
        ...


@contextmanager
def pinned(readers: Iterable[SourceReader]) -> Iterator[None]:
    """Pin every reader's metadata for one tick (:meth:`SourceReader.pinned`)."""
    with ExitStack() as stack:
        for reader in readers:
            stack.enter_context(reader.pinned())
        yield


@dataclass(frozen=True)
class TickReads:
    """Reads a source on the driver at a tick's old or new version (``ivm.ArrowRead``).

    A class here rather than a closure in the tick's own module, so that a refresh's
    profile counts a read inside the view delta that asks for it.
    """

    reader: SourceReader
    old: int
    new: int

    def __call__(self, role: str, columns: Sequence[str], keys: Mapping[str, KeyValues],
                 max_rows: int) -> pa.Table | None:
        """``reader.arrow_rows`` at the version of ``role`` (``new`` or ``old``)."""
        return self.reader.arrow_rows(self.new if role == "new" else self.old, columns, keys,
                                      max_rows)


def aligned(frame: DataFrame, columns: StructType) -> list[str]:
    """SQL selecting ``columns`` from ``frame`` by name, cast to their types.

    A column ``frame`` lacks is null; one whose type already matches is not cast.

    One ``selectExpr`` of strings instead of a Column per field: a few py4j calls
    rather than several per column.
    """
    present = {f.name: f.dataType for f in frame.schema.fields}
    expressions = []
    for field in columns.fields:
        name = "`" + field.name.replace("`", "``") + "`"
        if present.get(field.name) == field.dataType:
            expressions.append(name)
        else:
            value = name if field.name in present else "NULL"
            expressions.append(f"CAST({value} AS {field.dataType.simpleString()}) AS {name}")
    return expressions
