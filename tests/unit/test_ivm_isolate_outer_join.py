"""The outer-join isolation rule (sqlglot only): the moved join's columns keep their meaning."""

from __future__ import annotations

import duckdb
import sqlglot
from sqlglot import exp

from ivm.isolate_outer_join import isolate_outer_joins
from tests.qualified_sql import qualified_select

SCHEMAS = {"a": {"k": "int"}, "t": {"k": "int", "r__k": "int"}, "r": {"k": "int"}}
ROWS = {"a": [(1,), (2,), (3,)], "t": [(1, 10), (2, 20), (3, None)], "r": [(1,), (3,)]}


def _isolated(sql: str) -> exp.Select:
    result = isolate_outer_joins(qualified_select(sql, SCHEMAS))
    assert isinstance(result, exp.Select)
    return result


def _rows(sql: str) -> list[tuple[object, ...]]:
    """The query's rows on DuckDB over :data:`ROWS`, sorted."""
    with duckdb.connect() as connection:
        for table, rows in ROWS.items():
            columns = ", ".join(f"{name} INTEGER" for name in SCHEMAS[table])
            connection.execute(f"CREATE TABLE {table} ({columns})")
            if rows:
                connection.executemany(
                    f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        return sorted(connection.execute(sqlglot.transpile(sql, read="spark", write="duckdb")[0])
                      .fetchall(), key=repr)


def test_a_moved_column_named_like_one_of_the_left_table_keeps_its_own_value() -> None:
    sql = ("SELECT a.k, t.r__k AS left_value, r.k AS right_value FROM a JOIN t ON a.k = t.k "
           "LEFT JOIN r ON r.k = t.k")
    query = _isolated(sql)
    derived = next(node for node in query.find_all(exp.Subquery))
    names = [s.alias for s in derived.this.selects]
    assert len(names) == len(set(names)), names  # t.r__k and r.k are told apart
    expected = _rows(sql)
    assert any(row[2] is None for row in expected)  # an unmatched row of the outer join
    assert _rows(query.sql("spark")) == expected
