"""Reference answers: DuckDB's own TPC-H queries (``tpch`` extension) over the same Parquet files.

DuckDB ships the 22 queries with the validation parameters; running them on the files the
tests read gives an independent answer for each of our Spark SQL texts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path

import duckdb

from tests.tpch.schema import TABLES


def _extension() -> Path:
    import duckdb_extension_tpch

    folder = Path(duckdb_extension_tpch.__file__).parent / "extensions"
    return folder / f"v{duckdb.__version__}" / "tpch.duckdb_extension"


def duckdb_answers(folder: Path) -> dict[int, list[tuple[object, ...]]]:
    """Query number -> DuckDB's rows for that TPC-H query over ``folder/<table>.parquet``."""
    con = duckdb.connect()
    try:
        con.execute(f"LOAD '{_extension()}'")
        for table in TABLES:
            path = str(folder / f"{table}.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
        queries = con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()
        return {number: con.execute(text).fetchall() for number, text in queries}
    finally:
        con.close()


def _value(value: object) -> object:
    return float(value) if isinstance(value, Decimal | float) else value


def _sort_key(row: Sequence[object]) -> tuple[str, ...]:
    return tuple(f"{v:.2f}" if isinstance(v, float) else repr(v) for v in row)


def same_rows(actual: Iterable[Sequence[object]], expected: Iterable[Sequence[object]]) -> bool:
    """Whether two row lists hold the same rows in any order, numbers equal to 1e-6 relative.

    Decimals and floats compare as floats: Spark keeps AVG and division results as decimals
    with 6 digits where DuckDB returns doubles.
    """
    left = sorted((tuple(_value(v) for v in row) for row in actual), key=_sort_key)
    right = sorted((tuple(_value(v) for v in row) for row in expected), key=_sort_key)
    return len(left) == len(right) and all(
        len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
        for a, b in zip(left, right, strict=True)
    )


def _close(x: object, y: object) -> bool:
    if isinstance(x, float | int) and isinstance(y, float | int):
        return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)
    return x == y
