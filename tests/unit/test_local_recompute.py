"""Affected-key recompute on the local engine: the groups a change touches, read restricted.

Each delta is checked against a full recompute of the view's SQL (DuckDB over the whole
tables, new minus old); Spark's answer is checked by the differential harness
(``tests/integration/test_ivm_differential.py``).
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from ivm import compile_view
from ivm.driver_delta import EMPTY, ArrowRead
from ivm.key_ranges import KeyValues
from ivm.local_recompute import GroupedBlock, grouped_block, recompute_delta
from tests.conftest import arrow_reader, multiset

SCHEMAS = {
    "flights": {"carrier": "string", "month": "int", "dep_delay": "double",
                "fare": "decimal(7,2)"},
    "airlines": {"carrier": "string", "name": "string"},
}
FLIGHTS = pa.schema([("carrier", pa.string()), ("month", pa.int32()),
                     ("dep_delay", pa.float64()), ("fare", pa.decimal128(7, 2))])
AIRLINES = pa.schema([("carrier", pa.string()), ("name", pa.string())])
OLD_FLIGHTS = [("AA", 1, 5.0, Decimal("10.00")), ("AA", 1, 15.0, Decimal("20.00")),
               ("UA", 1, 1.5, Decimal("5.00")), ("UA", 2, None, None),
               (None, 2, 7.0, Decimal("1.00")), ("DL", 3, 2.0, Decimal("3.00"))]
INSERTED = [("AA", 1, 30.0, Decimal("1.25")), (None, 2, -1.0, Decimal("2.00"))]
DELETED = [("UA", 1, 1.5, Decimal("5.00"))]
AIRLINE_ROWS = [("AA", "American"), ("UA", "United"), ("DL", "Delta")]


def _relation(role: str, source: str) -> str:
    return f"{source}__{role}"


def _table(rows: Sequence[tuple], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows],
                                schema=schema)


def _sources() -> tuple[dict[str, pa.Table], dict[str, pa.Table], dict[str, pa.Table]]:
    """Old and new tables, and the change feed of ``flights``."""
    new_rows = [r for r in OLD_FLIGHTS if r not in DELETED] + INSERTED
    old = {"flights": _table(OLD_FLIGHTS, FLIGHTS), "airlines": _table(AIRLINE_ROWS, AIRLINES)}
    new = {"flights": _table(new_rows, FLIGHTS), "airlines": old["airlines"]}
    rows = INSERTED + DELETED
    change = _table(rows, FLIGHTS).append_column(
        "_weight", pa.array([1] * len(INSERTED) + [-1] * len(DELETED),
                            pa.int64()))
    return old, new, {"flights": change}


def _recorded(read: ArrowRead, log: list[tuple[str, Mapping[str, KeyValues]]]) -> ArrowRead:
    def recording(role: str, columns: Sequence[str], keys: Mapping[str, KeyValues],
                  max_rows: int) -> pa.Table | None:
        log.append((role, dict(keys)))
        return read(role, columns, keys, max_rows)
    return recording


def _block(sql: str) -> GroupedBlock:
    block = grouped_block(compile_view("v", sql, SCHEMAS).query)
    assert not isinstance(block, str), block
    return block


def _recomputed(sql: str, tables: Mapping[str, pa.Table]) -> Counter:
    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    return multiset(connection.sql(sql).fetchall())


def _delta(sql: str, log: list | None = None) -> tuple[Counter, Counter]:
    """The local delta of the view, and the full recompute's (new minus old), by row."""
    old, new, changes = _sources()
    readers = {name: arrow_reader(new[name], old[name]) for name in new}
    if log is not None:
        readers = {name: _recorded(read, log) for name, read in readers.items()}
    delta = recompute_delta(_block(sql), changes, readers, _relation, 1_000)
    assert not isinstance(delta, str), delta
    found: Counter = Counter()
    for row in [] if delta is EMPTY else delta.to_pylist():
        found[tuple(multiset([tuple(row.values())[:-1]]))[0]] += row["_weight"]
    expected = _recomputed(sql, new)
    expected.subtract(_recomputed(sql, old))
    return _nonzero(found), _nonzero(expected)


def _nonzero(weights: Counter) -> Counter:
    return Counter({row: weight for row, weight in weights.items() if weight})


@pytest.mark.parametrize("sql", [
    "SELECT f.carrier, a.name, COUNT(*) AS n, MIN(f.dep_delay) AS lo, MAX(f.fare) AS hi, "
    "AVG(f.dep_delay) AS a, SUM(f.fare) AS s FROM flights f JOIN airlines a "
    "ON f.carrier = a.carrier GROUP BY f.carrier, a.name",
    "SELECT carrier, month, COUNT(dep_delay) AS c, AVG(month) AS m, SUM(month) AS t "
    "FROM flights GROUP BY carrier, month",
    "SELECT COUNT(*) AS n, MAX(dep_delay) AS hi, SUM(fare) AS s FROM flights",
    "SELECT DISTINCT carrier FROM flights WHERE dep_delay > 1",
    "SELECT month, COUNT(DISTINCT carrier) AS c, COUNT(DISTINCT fare) AS f FROM flights "
    "GROUP BY month",
    # a group leaves (UA) and one enters (NULL) the HAVING; outputs over aggregates
    "SELECT carrier, COUNT(*) AS n, MAX(fare) - MIN(fare) AS r FROM flights "
    "GROUP BY carrier HAVING COUNT(*) > 1",
])
def test_the_delta_equals_a_full_recompute(sql: str) -> None:
    found, expected = _delta(sql)
    assert found == expected
    assert found  # each view changes


def test_reads_are_restricted_to_the_affected_groups() -> None:
    log: list[tuple[str, Mapping[str, KeyValues]]] = []
    found, expected = _delta("SELECT f.carrier, MAX(f.dep_delay) AS hi FROM flights f "
                             "JOIN airlines a ON f.carrier = a.carrier GROUP BY f.carrier", log)
    assert found == expected
    carriers = [keys["carrier"].values for _, keys in log]
    assert all(listed is not None and "DL" not in listed for listed in carriers), log
    assert {role for role, _ in log} == {"new", "old"}  # DL (unchanged) is never read


def test_a_null_group_is_recomputed_from_every_row() -> None:
    found, expected = _delta("SELECT carrier, SUM(fare) AS s FROM flights GROUP BY carrier")
    assert found == expected
    assert found[(None, Decimal("3.00"))] == 1 and found[(None, Decimal("1.00"))] == -1


@pytest.mark.parametrize(("sql", "reason"), [
    ("SELECT carrier, SUM(fare) / COUNT(*) AS r FROM flights GROUP BY carrier",
     "Div is not taken by the local engine"),
    ("SELECT carrier, COUNT(*) FILTER (WHERE month > 1) AS n FROM flights GROUP BY carrier",
     "FILTER or a window over the groups"),
    ("SELECT carrier, STDDEV(month) AS n FROM flights GROUP BY carrier",
     "an aggregate the local engine does not take"),
    ("SELECT MAX(1) AS m, COUNT(*) AS n FROM flights", "no column of it read"),
    ("SELECT carrier, SUM(DISTINCT month) AS m FROM flights GROUP BY carrier",
     "DISTINCT inside an aggregate other than COUNT(DISTINCT x)"),
    ("SELECT carrier, COUNT(DISTINCT dep_delay) AS m FROM flights GROUP BY carrier",
     "distinct floating-point values"),
    ("SELECT carrier, month, SUM(fare) OVER (PARTITION BY carrier) AS s FROM flights",
     "no grouping"),
    ("SELECT carrier, AVG(fare) AS a FROM flights GROUP BY carrier",
     "an average of decimals rounds as Spark's Divide"),
    ("SELECT dep_delay, COUNT(*) AS n FROM flights GROUP BY dep_delay", "floating point"),
])
def test_shapes_outside_the_local_engine_are_refused(sql: str, reason: str) -> None:
    block = grouped_block(compile_view("v", sql, SCHEMAS).query)
    assert isinstance(block, str) and reason in block


def test_values_spark_computes_otherwise_go_to_spark() -> None:
    """Types the SQL does not show (a source read as decimals) are checked on the rows."""
    def as_decimal(table: pa.Table) -> pa.Table:
        month = table.schema.get_field_index("month")
        return table.set_column(month, "month", table.column(month).cast(pa.decimal128(10, 0)))

    old, new, changes = _sources()
    readers = {"flights": arrow_reader(as_decimal(new["flights"]), as_decimal(old["flights"]))}
    grouped = _block("SELECT carrier, AVG(month) AS m FROM flights GROUP BY carrier")
    delta = recompute_delta(grouped, {"flights": as_decimal(changes["flights"])}, readers,
                            _relation, 1_000)
    assert isinstance(delta, str) and "rounded as Spark's" in delta


def test_a_read_over_the_limit_declines() -> None:
    old, new, changes = _sources()
    readers = {name: arrow_reader(new[name], old[name]) for name in new}
    block = _block("SELECT month, MIN(fare) AS lo FROM flights GROUP BY month")
    delta = recompute_delta(block, changes, readers, _relation, 2)
    assert isinstance(delta, str) and "declined (more than 2 rows" in delta


def test_a_decimal_sum_near_38_digits_goes_to_spark() -> None:
    """DuckDB adds chunks' partial sums unchecked: a magnitude bound sends the tick to Spark."""
    wide = pa.decimal128(38, 0)
    schema = pa.schema([("carrier", pa.string()), ("v", wide)])
    big = Decimal(6 * 10 ** 37)
    old_rows = _table([("AA", big)], schema)
    new_rows = _table([("AA", big), ("AA", big)], schema)
    change = _table([("AA", big)], schema).append_column("_weight", pa.array([1], pa.int64()))
    block = grouped_block(compile_view("v", "SELECT carrier, SUM(v) AS s, MAX(v) AS m FROM t "
                                       "GROUP BY carrier", {"t": {"carrier": "string",
                                                                  "v": "decimal(38,0)"}}).query)
    assert not isinstance(block, str), block
    delta = recompute_delta(block, {"t": change}, {"t": arrow_reader(new_rows, old_rows)},
                            _relation, 1_000)
    assert isinstance(delta, str) and "__v0 near the range of its type" in delta
