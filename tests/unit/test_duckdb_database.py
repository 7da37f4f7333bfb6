"""A shared DuckDB database hands out cursors and is renewed after a number of them."""

from __future__ import annotations

import duckdb

from ivm.duckdb_database import SharedDatabase


def _tables(cursor: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in cursor.sql("SELECT table_name FROM duckdb_tables()").fetchall()]


def test_cursors_share_one_database_until_it_is_renewed() -> None:
    shared = SharedDatabase({"threads": 1}, renew_after=3)
    first = shared.cursor()
    first.execute("CREATE TABLE kept AS SELECT 1 AS x")
    second, third = shared.cursor(), shared.cursor()
    assert _tables(second) == _tables(third) == ["kept"]  # one database, three cursors
    renewed = shared.cursor()
    assert _tables(renewed) == []  # the fourth cursor is of a new database
    assert first.sql("SELECT x FROM kept").fetchall() == [(1,)]  # the old one still answers
    for cursor in (first, second, third, renewed):
        cursor.close()


def test_a_cursor_takes_the_databases_settings() -> None:
    shared = SharedDatabase({"threads": 1, "preserve_insertion_order": False}, renew_after=1)
    for _ in range(2):  # the first database, then a renewed one
        cursor = shared.cursor()
        assert cursor.sql("SELECT current_setting('threads'), "
                          "current_setting('preserve_insertion_order')").fetchall() == [
            (1, False)]
        cursor.close()
