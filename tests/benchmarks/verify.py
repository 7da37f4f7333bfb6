"""Is the incremental view right? Its rows against a full recompute's, in DuckDB.

Used by the TPC-H benchmark after every batch (outside the timed refreshes): the incremental
view's Iceberg table against the full view's (Spark recompute of the same SQL at the same
frontier) and against DuckDB's recompute over the same Iceberg sources.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

RELATIVE_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-6
"""Numeric values may differ by ``ABSOLUTE_TOLERANCE + RELATIVE_TOLERANCE * |expected|``: an
AVG kept as SUM/COUNT, or computed as DOUBLE by DuckDB, rounds differently from Spark's
decimal AVG (``decimal(p, 6)`` for TPC-H Q1: up to 5e-7 apart)."""


def _numeric(field: pa.Field) -> bool:
    return bool(pa.types.is_decimal(field.type) or pa.types.is_floating(field.type))


def compare(actual: pa.Table, expected: pa.Table) -> dict[str, Any]:
    """Rows of ``actual`` against ``expected``, as multisets.

    Columns are matched by name (``expected``'s columns; ``actual`` may carry more). Non-numeric
    columns must be equal (NULL equals NULL); decimal and floating columns may differ by
    the tolerances above. Rows are paired by their non-numeric columns, so the check
    suits views whose non-numeric columns are a key (every grouped view here).

    Args:
        actual: The incremental view's rows.
        expected: The full recompute's rows.

    Returns:
        ``{"rows": len(actual), "expected_rows": len(expected), "mismatched": n}``: ``n`` is
        the number of rows on either side without an equal partner on the other.
    """
    names = expected.column_names
    keys = [f.name for f in expected.schema if not _numeric(f)]
    values = [f.name for f in expected.schema if _numeric(f)]
    con = duckdb.connect()
    con.register("a_in", actual.select(names))
    con.register("e_in", expected)
    con.execute("CREATE TEMP VIEW a AS SELECT *, row_number() OVER () AS _rid FROM a_in")
    con.execute("CREATE TEMP VIEW e AS SELECT *, row_number() OVER () AS _rid FROM e_in")
    on = " AND ".join(f'a."{k}" IS NOT DISTINCT FROM e."{k}"' for k in keys) or "TRUE"
    close = " AND ".join(
        f'(a."{v}" IS NULL AND e."{v}" IS NULL OR abs(a."{v}"::DOUBLE - e."{v}"::DOUBLE) <= '
        f'{ABSOLUTE_TOLERANCE} + {RELATIVE_TOLERANCE} * abs(e."{v}"::DOUBLE))' for v in values
    ) or "TRUE"
    pairs = con.execute(f"SELECT count(DISTINCT a._rid), count(DISTINCT e._rid) "
                        f"FROM a JOIN e ON {on} WHERE {close}").fetchone()
    con.close()
    assert pairs is not None
    mismatched = (actual.num_rows - pairs[0]) + (expected.num_rows - pairs[1])
    return {"rows": actual.num_rows, "expected_rows": expected.num_rows,
            "mismatched": int(mismatched)}
