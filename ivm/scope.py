"""The scope of one evaluation on Spark: the temp views that name its relations.

A relation is a source at a role: ``new`` and ``old`` (its snapshots at the tick's
frontiers) and ``delta`` (its change feed), or one the evaluation computed (affected keys,
a derived table lifted as a virtual source). Relations are registered only when a Spark
query first reads them, so a tick the local engine runs registers none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import count

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from ivm.driver_delta import DRIVER_READ_MAX_ROWS, ArrowRead

__all__ = ["Scope", "frame_of", "identifier"]

_IDENTIFIER = re.compile(r"\W")


def frame_of(rows: DataFrame | Callable[[], DataFrame]) -> DataFrame:
    """``rows``, or the frame it returns when it is a function."""
    return rows if isinstance(rows, DataFrame) else rows()


def identifier(name: str) -> str:
    """``name`` with every character that is not a word character replaced by ``_``."""
    return _IDENTIFIER.sub("_", name)


@dataclass
class Scope:
    """The temporary views of one evaluation, dropped when it ends.

    Attributes:
        session: Returns the Spark session (called when a Spark query first runs).
        prefix: Names this evaluation's temp views (unique per tick: ticks of several
            views run at once).
        changed: The sources (and lifted derived tables) whose change feed is not empty.
        arrows: The change feeds given in Arrow, by source.
        readers: How to read each source on the driver (:data:`ivm.driver_delta.ArrowRead`).
        read_max_rows: Most rows one driver read may scan.
        registered: The temp views registered so far (dropped at the end).
        counter: Numbers the relations the evaluation registers.
        pending: Relations registered when a Spark query first reads them.
        derived: The virtual source of each derived table lifted so far, by its body's SQL.
    """

    session: Callable[[], SparkSession]
    prefix: str
    changed: set[str]
    arrows: dict[str, pa.Table] = field(default_factory=dict)
    readers: dict[str, ArrowRead | None] = field(default_factory=dict)
    read_max_rows: int = DRIVER_READ_MAX_ROWS
    registered: list[str] = field(default_factory=list)
    counter: Iterator[int] = field(default_factory=count)
    pending: dict[str, DataFrame | Callable[[], DataFrame]] = field(default_factory=dict)
    derived: dict[str, str] = field(default_factory=dict)

    @cached_property
    def spark(self) -> SparkSession:
        """The Spark session, looked up when a Spark query first runs.

        A tick evaluated on the driver runs none, and the lookup costs py4j calls.
        """
        return self.session()

    def relation(self, role: str, source: str) -> str:
        """The temp view holding ``source`` at ``role`` (new, old or delta)."""
        return f"{self.prefix}_{role}_{identifier(source)}"

    def register(self, frame: DataFrame, role: str, source: str = "") -> str:
        """Make ``frame`` a temp view of this evaluation and return its name."""
        name = self.relation(role, source or f"n{next(self.counter)}")
        frame.createOrReplaceTempView(name)
        self.registered.append(name)
        return name

    def defer(self, frame: DataFrame | Callable[[], DataFrame], role: str, source: str
              ) -> None:
        """Register ``frame`` (or the frame it returns) when a Spark query first reads it.

        A change feed in Arrow then becomes a Spark frame only if Spark reads it; a tick
        evaluated on the driver registers nothing.
        """
        self.pending[self.relation(role, source)] = frame

    def table(self, role: str, source: str) -> DataFrame:
        """The frame of ``source`` at ``role``."""
        name = self.relation(role, source)
        self._flush({name})
        return self.spark.table(name)

    def run(self, query: exp.Query) -> DataFrame:
        """Run ``query``; the result stays valid after the temp views are dropped.

        A frame from ``spark.sql`` keeps its unresolved plan, which names the temp
        views, and ``DataFrameWriterV2`` re-analyses that plan. Selecting from the
        frame pins the analysed plan instead.
        """
        self._flush({table.name for table in query.find_all(exp.Table)})
        return self.spark.sql(query.sql("spark")).select("*")

    def _flush(self, names: set[str]) -> None:
        """Register the pending relations among ``names``."""
        for name in names & set(self.pending):
            frame = self.pending.pop(name)
            frame_of(frame).createOrReplaceTempView(name)
            self.registered.append(name)
