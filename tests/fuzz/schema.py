"""The fuzzer's fixed schema: three tables with keys, NULLs, decimals, doubles, dates, strings.

``orders`` references ``customers`` (``cust``) and ``lines`` references ``orders``
(``o_id``); ``orders.o_id`` and ``customers.c_id`` are keys (unique, never NULL). Values
come from small domains, so that joins match, groups collide and rows repeat. Doubles
are dyadic fractions (sums exact in any order) plus NaN and -0.0, which Spark groups and
compares in its own way.
"""

from __future__ import annotations

import datetime
import math
import random
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["KEYS", "SCHEMAS", "TABLES", "Column", "decode", "encode", "random_row"]


@dataclass(frozen=True)
class Column:
    """A column of the schema: its name, Spark type, kind and values.

    Attributes:
        name: The column's name.
        spark_type: Its Spark SQL type.
        kind: ``int``, ``decimal``, ``double``, ``string`` or ``date``: what literals and
            operations suit it.
        values: The values rows take (None: NULL).
    """

    name: str
    spark_type: str
    kind: str
    values: tuple[object, ...]


_DAYS = (datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), datetime.date(2024, 2, 29), None)
TABLES: dict[str, tuple[Column, ...]] = {
    "orders": (
        Column("o_id", "int", "int", tuple(range(1, 13))),
        Column("cust", "int", "int", (1, 2, 3, 4, None)),
        Column("status", "string", "string", ("open", "done", "late", None)),
        Column("amount", "decimal(9,2)", "decimal",
               (Decimal("-5.00"), Decimal("0.00"), Decimal("12.50"), Decimal("99.99"), None)),
        Column("score", "double", "double", (0.0, -0.0, 1.5, 7.25, -2.5, math.nan, None)),
        Column("day", "date", "date", _DAYS),
    ),
    "customers": (
        Column("c_id", "int", "int", (1, 2, 3, 4, 5)),
        Column("region", "string", "string", ("EU", "US", "APAC", None)),
        Column("tier", "int", "int", (1, 2, 3, None)),
    ),
    "lines": (
        Column("o_id", "int", "int", tuple(range(1, 13))),
        Column("qty", "int", "int", (1, 2, 5, None)),
        Column("price", "decimal(7,2)", "decimal", (Decimal("1.00"), Decimal("2.50"), None)),
    ),
}
KEYS = {"orders": ("o_id",), "customers": ("c_id",)}
"""Each keyed table's primary key: unique and never NULL in every snapshot."""
SCHEMAS = {name: {c.name: c.spark_type for c in columns} for name, columns in TABLES.items()}
"""Table -> column -> Spark type, as :func:`ivm.compile_view` takes them."""


def ddl(table: str) -> str:
    """The table's schema as a Spark DDL string (``"o_id int, cust int, ..."``)."""
    return ", ".join(f"{c.name} {c.spark_type}" for c in TABLES[table])


def random_row(rnd: random.Random, table: str, key: object = None) -> tuple[object, ...]:
    """A row of ``table`` with random values (its key column set to ``key`` when given)."""
    row = [rnd.choice(c.values) for c in TABLES[table]]
    if key is not None:
        row[0] = key
    return tuple(row)


def encode(table: str, row: tuple[object, ...]) -> list[object]:
    """A row as JSON values: decimals and dates as strings, NaN as ``"NaN"``."""
    encoded: list[object] = []
    for column, value in zip(TABLES[table], row, strict=True):
        if value is None or column.kind in ("int", "string"):
            encoded.append(value)
        elif column.kind == "double":
            encoded.append(repr(value))
        else:
            encoded.append(str(value))
    return encoded


def decode(table: str, values: list[object]) -> tuple[object, ...]:
    """The inverse of :func:`encode`."""
    parse = {"decimal": Decimal, "double": float, "date": datetime.date.fromisoformat}
    return tuple(value if value is None or column.kind not in parse
                 else parse[column.kind](value)  # type: ignore[operator]
                 for column, value in zip(TABLES[table], values, strict=True))
