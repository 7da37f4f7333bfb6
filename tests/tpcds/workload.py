"""The TPC-DS schema and queries, from DuckDB's ``tpcds`` extension, in Spark's terms.

The extension (``duckdb-extension-tpcds``, a dev dependency) creates the 24 tables
(``dsdgen``) and lists the 99 queries (``tpcds_queries()``) in DuckDB's dialect; the
schema's types are mapped to Spark's and each query is transpiled to Spark SQL with
sqlglot. A query text of several statements would give a view per statement (``q14a``,
``q14b``); the extension lists one statement for each of the 99 (``q01`` to ``q99``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import duckdb
import sqlglot

from lakehouse.duckdb_client import extension_path

__all__ = ["Query", "connect", "queries", "schemas"]

_TYPES = {"INTEGER": "int", "BIGINT": "bigint", "VARCHAR": "string", "DATE": "date",
          "DOUBLE": "double", "TIME": "string"}


@dataclass(frozen=True)
class Query:
    """One TPC-DS statement as a view.

    Attributes:
        name: ``q03``, or ``q14a`` / ``q14b`` for a query of two statements.
        sql: The statement in Spark SQL.
    """

    name: str
    sql: str


def connect(scale_factor: float = 0) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the TPC-DS tables generated at ``scale_factor`` (0: empty)."""
    connection = duckdb.connect()
    connection.execute("SET enable_progress_bar = false")
    connection.load_extension(str(extension_path("tpcds")))
    connection.execute(f"CALL dsdgen(sf={scale_factor})")
    return connection


@cache
def schemas() -> dict[str, dict[str, str]]:
    """Table -> column -> Spark SQL type."""
    rows = connect().execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "ORDER BY table_name, ordinal_position").fetchall()
    found: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        spark_type = (data_type.lower() if data_type.startswith("DECIMAL")
                      else _TYPES[data_type])
        found.setdefault(table, {})[column] = spark_type
    return found


@cache
def queries() -> tuple[Query, ...]:
    """The 99 queries' statements, in Spark SQL."""
    found = []
    for number, text in connect().execute(
            "SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall():
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
        for index, statement in enumerate(statements):
            suffix = "ab"[index] if len(statements) > 1 else ""
            found.append(Query(f"q{number:02d}{suffix}", statement.sql("spark")))
    return tuple(found)
