"""Key inference (sqlglot only): GROUP BY, DISTINCT, and source keys through joins."""

from __future__ import annotations

import pytest

from ivm import PlanNode, SqlParseError, compile_view, explain

SCHEMAS = {
    "flights": {"id": "bigint", "carrier": "string", "month": "int", "dep_delay": "double",
                "tail": "string", "code": "string"},
    "airlines": {"carrier": "string", "name": "string"},
    "planes": {"tail": "string", "model": "string"},
    "routes": {"carrier": "string", "month": "int", "route": "string"},
    "codes": {"code": "int", "label": "string"},
    "speeds": {"speed": "double", "label": "string"},
}
KEYS = {"flights": ["id"], "airlines": ["carrier"], "planes": ["tail"],
        "routes": ["carrier", "month"], "codes": ["code"], "speeds": ["speed"]}


def _key(sql: str, keys: dict[str, list[str]] | None = None) -> tuple[str, ...] | None:
    plan = compile_view("v", sql, SCHEMAS, source_keys=KEYS if keys is None else keys)
    assert plan.incremental, plan.reason
    return plan.key


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        ("SELECT DISTINCT carrier, month FROM flights", ("carrier", "month")),
        ("SELECT DISTINCT month + 1 AS m, carrier FROM flights", ("m", "carrier")),
        ("SELECT carrier, COUNT(*) AS n FROM flights GROUP BY carrier", ("carrier",)),
        ("SELECT COUNT(*) AS n FROM flights", ()),
        ("SELECT carrier FROM flights UNION SELECT carrier FROM airlines", ("carrier",)),
        ("SELECT carrier FROM flights UNION ALL SELECT carrier FROM airlines", None),
    ],
)
def test_grouping_and_distinct_give_keys_without_source_keys(sql: str, key: object) -> None:
    assert _key(sql, keys={}) == key


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        # a filter and projection over one keyed source that outputs the key
        ("SELECT id, carrier FROM flights WHERE month = 1", ("id",)),
        ("SELECT carrier, id AS flight FROM flights", ("flight",)),
        ("SELECT carrier, month FROM flights", None),  # the key is not an output
        # FK joins keep the referencing side's key, in any order and syntax
        ("SELECT f.id, a.name FROM flights f JOIN airlines a ON f.carrier = a.carrier",
         ("id",)),
        ("SELECT a.name, f.id FROM airlines a JOIN flights f ON a.carrier = f.carrier",
         ("id",)),
        ("SELECT f.id, a.name FROM flights f, airlines a WHERE f.carrier = a.carrier",
         ("id",)),
        ("SELECT f.id, a.name, p.model FROM flights f JOIN airlines a ON f.carrier = a.carrier "
         "JOIN planes p ON p.tail = f.tail", ("id",)),
        # a composite key must be equated whole
        ("SELECT f.id, r.route FROM flights f JOIN routes r "
         "ON f.carrier = r.carrier AND f.month = r.month", ("id",)),
        ("SELECT f.id, r.route FROM flights f JOIN routes r ON f.carrier = r.carrier", None),
        ("SELECT f.id, r.carrier, r.month, r.route FROM flights f JOIN routes r "
         "ON f.carrier = r.carrier", ("id", "month")),  # r.carrier is f.carrier
        # not an FK join: both keys
        ("SELECT f.id, a.carrier, a.name FROM flights f JOIN airlines a ON f.month > 1",
         ("id", "carrier")),
        ("SELECT f.id, a.name FROM flights f JOIN airlines a ON f.month > 1", None),
        # an equated key column stands in for the other side's
        ("SELECT a.carrier, a.name, r.route, r.month FROM routes r JOIN airlines a "
         "ON r.carrier = a.carrier", ("carrier", "month")),
        # outer joins: the preserved side's key when it references the other side's key
        ("SELECT f.id, a.name FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier",
         ("id",)),
        ("SELECT f.id, a.name FROM airlines a RIGHT JOIN flights f ON f.carrier = a.carrier",
         ("id",)),
        ("SELECT f.id, a.carrier FROM flights f FULL JOIN airlines a ON f.carrier = a.carrier",
         ("id", "carrier")),
        ("SELECT f.id, a.name FROM flights f FULL JOIN airlines a ON f.carrier = a.carrier",
         None),
        ("SELECT a.carrier, a.name FROM flights f RIGHT JOIN airlines a "
         "ON f.carrier = a.carrier", None),  # an airline with many flights repeats
        # rewritten subqueries keep the key: IN (a LEFT JOIN to distinct values), NOT IN
        ("SELECT id, carrier FROM flights WHERE carrier IN (SELECT carrier FROM airlines)",
         ("id",)),
        ("SELECT id, carrier FROM flights WHERE carrier NOT IN (SELECT carrier FROM airlines)",
         ("id",)),
        # a derived table's key (GROUP BY) is a source key to the outer block
        ("SELECT a.name, x.carrier, x.n FROM (SELECT carrier, COUNT(*) AS n FROM flights "
         "GROUP BY carrier) x JOIN airlines a ON x.carrier = a.carrier", ("carrier",)),
        ("SELECT a.name, x.n FROM (SELECT carrier, COUNT(*) AS n FROM flights "
         "GROUP BY carrier) x JOIN airlines a ON x.carrier = a.carrier", None),
    ],
)
def test_source_keys_are_carried_through_filters_projections_and_joins(
    sql: str, key: object
) -> None:
    assert _key(sql) == key


@pytest.mark.parametrize(
    ("sql", "keys"),
    [
        # Spark casts across types ('01' = 1): one code matches several flights' strings
        ("SELECT f.id, c.label FROM flights f JOIN codes c ON f.code = c.code", KEYS),
        ("SELECT f.id, c.label FROM flights f JOIN codes c ON CAST(f.code AS int) = c.code",
         KEYS),  # an expression, not a column: not used either
        # doubles: 0.0 = -0.0, so equal is not identical
        ("SELECT f.id, s.label FROM flights f JOIN speeds s ON f.dep_delay = s.speed", KEYS),
        # an unkeyed input may repeat rows
        ("SELECT f.id FROM flights f JOIN airlines a ON f.carrier = a.carrier",
         {"flights": ["id"]}),
        ("SELECT f.id, f.carrier FROM flights f", {}),
    ],
)
def test_no_key_where_rows_may_repeat(sql: str, keys: dict[str, list[str]]) -> None:
    assert _key(sql, keys) is None


def test_an_equality_within_one_exact_type_carries_the_key() -> None:
    assert _key("SELECT f.id, c.label FROM flights f JOIN codes c ON f.month = c.code") == (
        "id",)


def _keys(node: PlanNode) -> list[tuple[str, tuple[str, ...] | None]]:
    return [(node.operator, node.key)] + [k for c in node.children for k in _keys(c)]


def test_every_node_carries_its_key_and_explain_prints_it() -> None:
    plan = compile_view(
        "v", "SELECT f.id, f.month, a.name FROM flights f, airlines a "
             "WHERE f.carrier = a.carrier AND f.month > 1", SCHEMAS, source_keys=KEYS)
    assert _keys(plan.root) == [
        ("project", ("id",)), ("filter", ("f.id",)), ("join", ("f.id", "a.carrier")),
        ("scan", ("id",)), ("scan", ("carrier",)),
    ]
    text = explain(plan)
    assert "key: id" in text
    for line in ("key: (f.id)", "key: (f.id, a.carrier)", "key: (carrier)"):
        assert line in text


def test_derived_table_node_carries_its_key() -> None:
    plan = compile_view(
        "v", "SELECT a.name, x.n FROM (SELECT carrier, COUNT(*) AS n FROM flights "
             "GROUP BY carrier) x JOIN airlines a ON x.carrier = a.carrier", SCHEMAS,
        source_keys=KEYS)
    assert ("derived table", ("carrier",)) in _keys(plan.root)
    assert ("aggregate", ("carrier",)) in _keys(plan.root)


def test_declared_view_key_overrides_the_inferred_one() -> None:
    plan = compile_view("v", "SELECT id, carrier FROM flights", SCHEMAS,
                        key=["carrier", "id"], source_keys=KEYS)
    assert plan.key == ("carrier", "id")


def test_source_keys_match_columns_case_insensitively_and_must_exist() -> None:
    schemas = {"Flights": {"ID": "bigint", "Carrier": "string"}}
    plan = compile_view("v", "SELECT ID, Carrier FROM Flights", schemas,
                        source_keys={"Flights": ["Id"]})
    assert plan.key == ("id",)
    with pytest.raises(SqlParseError, match="names columns it does not have"):
        compile_view("v", "SELECT ID FROM Flights", schemas, source_keys={"Flights": ["nope"]})
