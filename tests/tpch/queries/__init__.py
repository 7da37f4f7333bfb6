"""The 22 TPC-H queries in Spark SQL, one file each (``q01.sql`` .. ``q22.sql``).

Each file starts with ``--`` comments: the query's name, spec section and validation
parameters, and, when the spec's final ORDER BY was dropped (a view has no order), a line
``-- order: ORDER BY ...`` that records it. Queries whose spec returns the first N rows keep
their ORDER BY ... LIMIT N.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FOLDER = Path(__file__).parent
NUMBERS = tuple(range(1, 23))


@dataclass(frozen=True)
class Query:
    """One TPC-H query.

    Attributes:
        number: 1..22.
        sql: The statement, comments included.
        order: The spec's final ORDER BY that the file dropped, or None.
    """

    number: int
    sql: str
    order: str | None

    @property
    def name(self) -> str:
        """``q01`` .. ``q22``."""
        return f"q{self.number:02d}"

    @property
    def title(self) -> str:
        """The first comment line, e.g. ``TPC-H Q1, Pricing Summary Report (...)``."""
        return self.sql.splitlines()[0].removeprefix("--").split(" (")[0].strip()


def load(number: int) -> Query:
    """Read query ``number`` (1..22) from its file."""
    sql = (FOLDER / f"q{number:02d}.sql").read_text()
    orders = [line.removeprefix("-- order:").strip() for line in sql.splitlines()
              if line.startswith("-- order:")]
    return Query(number, sql, orders[0] if orders else None)


def all_queries() -> list[Query]:
    """The 22 queries in order."""
    return [load(n) for n in NUMBERS]
