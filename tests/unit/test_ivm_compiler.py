import pytest

from ivm import Law, SqlParseError, compile_view, explain

SCHEMAS = {
    "flights": {"carrier": "string", "month": "int", "dep_delay": "double", "origin": "string"},
    "airlines": {"carrier": "string", "name": "string"},
}


def test_group_by_join_infers_key_and_laws() -> None:
    plan = compile_view(
        "v",
        "SELECT f.carrier, a.name, f.month, COUNT(*) AS n, AVG(f.dep_delay) AS d "
        "FROM flights f JOIN airlines a ON f.carrier = a.carrier WHERE f.dep_delay > 0 "
        "GROUP BY f.carrier, a.name, f.month",
        SCHEMAS,
    )
    assert plan.incremental
    assert plan.key == ("carrier", "name", "month")
    assert plan.sources == ("flights", "airlines")
    assert plan.root.law is Law.AFFECTED_KEY_RECOMPUTE
    assert plan.root.children[0].law is Law.LINEAR
    assert plan.root.children[0].children[0].law is Law.BILINEAR_JOIN
    text = explain(plan)
    assert "bilinear join rule" in text and "key: carrier, name, month" in text
    assert "engine: local (DuckDB)" in text  # the affected groups recomputed locally


@pytest.mark.parametrize(("sql", "engine"), [
    ("SELECT carrier, dep_delay FROM flights WHERE dep_delay > 60", "local (DuckDB)"),
    ("SELECT f.origin, a.name FROM flights f JOIN airlines a ON f.carrier = a.carrier "
     "WHERE f.month BETWEEN 1 AND 3", "local (DuckDB)"),
    ("SELECT carrier, CAST(month AS string) AS m FROM flights",
     "spark (CAST(flights.month AS STRING): a cast other than DATE"),
    ("SELECT f.origin FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier",
     "spark (only filters, projections, inner joins and aggregates"),
    ("SELECT DISTINCT carrier FROM flights", "local (DuckDB)"),
    ("SELECT carrier, COUNT(DISTINCT month) AS m FROM flights GROUP BY carrier",
     "local (DuckDB)"),
    ("SELECT carrier, SUM(DISTINCT month) AS m FROM flights GROUP BY carrier",
     "spark (SUM(DISTINCT flights.month): DISTINCT inside an aggregate other than COUNT"),
])
def test_explain_says_which_blocks_the_local_engine_takes(sql: str, engine: str) -> None:
    """Filters, projections and inner joins in the guard's subset run locally; not others."""
    assert f"engine: {engine}" in explain(compile_view("v", sql, SCHEMAS))


def test_projection_has_no_key_and_star_expands() -> None:
    plan = compile_view("v", "SELECT * FROM flights WHERE month = 1", SCHEMAS)
    assert plan.key is None
    assert plan.columns == ("carrier", "month", "dep_delay", "origin")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT carrier, rand() AS r FROM flights", "non-deterministic"),
        ("SELECT carrier, row_number() OVER (ORDER BY month) AS r FROM flights", "window"),
        ("SELECT f.carrier FROM flights f LEFT JOIN airlines a ON f.carrier < a.carrier",
         "outer join"),
        ("SELECT f.carrier FROM flights f LEFT SEMI JOIN airlines a ON f.carrier = a.carrier",
         "SEMI join"),
        ("SELECT f.carrier FROM flights f WHERE f.carrier NOT IN "
         "(SELECT a.carrier FROM airlines a WHERE a.name <> f.origin)", "NOT IN"),
        ("SELECT carrier FROM flights WHERE carrier NOT IN (SELECT carrier FROM airlines) "
         "OR month = 1", "NOT IN"),
        ("SELECT carrier NOT IN (SELECT carrier FROM airlines) AS x FROM flights", "NOT IN"),
        ("SELECT f.carrier FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier "
         "WHERE f.origin NOT IN (SELECT name FROM airlines)", "NOT IN"),
        ("SELECT DISTINCT month, SUM(dep_delay) OVER (PARTITION BY month) AS s FROM flights",
         "window function over GROUP BY or DISTINCT"),
        ("SELECT carrier FROM flights ORDER BY carrier LIMIT 3 OFFSET 1", "OFFSET"),
        ("SELECT f.month, a.name FROM flights f JOIN (airlines a JOIN airlines b "
         "ON a.carrier = b.carrier) ON f.carrier = a.carrier", "parenthesized join"),
        ("SELECT carrier, COUNT(*) AS n FROM flights GROUP BY CUBE (carrier, month, origin, "
         "dep_delay, carrier || 'a', carrier || 'b', carrier || 'c')",
         "ROLLUP, CUBE or GROUPING SETS"),
        ("SELECT carrier FROM flights ORDER BY carrier LIMIT 100000", "LIMIT 100000"),
        ("SELECT x.carrier FROM (SELECT carrier FROM flights ORDER BY carrier LIMIT 3) x",
         "ORDER: top-K is maintained only at the top"),
    ],
)
def test_unsupported_constructs_name_their_reason(sql: str, reason: str) -> None:
    plan = compile_view("v", sql, SCHEMAS)
    assert not plan.incremental
    assert reason in (plan.reason or "")
    assert plan.root.law is Law.FULL_RECOMPUTE


def test_unknown_source_and_column_are_errors() -> None:
    with pytest.raises(SqlParseError, match="unknown source 'nope'"):
        compile_view("v", "SELECT * FROM nope", SCHEMAS)
    with pytest.raises(SqlParseError):
        compile_view("v", "SELECT missing_column FROM flights", SCHEMAS)
    with pytest.raises(SqlParseError, match="key"):
        compile_view("v", "SELECT carrier FROM flights", SCHEMAS, key=["month"])


def test_an_order_by_without_limit_is_dropped_and_parenthesized_branches_unwrapped() -> None:
    ordered = compile_view("v", "SELECT carrier, month FROM flights ORDER BY month DESC",
                           SCHEMAS)
    assert ordered.incremental and "ORDER" not in ordered.sql and ordered.top_k is None
    assert "ORDER" not in ordered.original_sql  # a full recompute leaves the order out too
    both = "SELECT COUNT(*) AS n FROM ((SELECT carrier FROM flights) EXCEPT " \
           "(SELECT carrier FROM airlines)) t"
    plan = compile_view("v", both, SCHEMAS)
    assert plan.incremental, plan.reason
    assert "(SELECT" not in plan.sql.replace("FROM (SELECT", "")
    nested = compile_view("v", "SELECT carrier FROM flights EXCEPT (SELECT carrier FROM "
                          "airlines EXCEPT SELECT origin FROM flights)", SCHEMAS)
    assert not nested.incremental and "not a SELECT block" in str(nested.reason)


def test_a_window_over_grouped_rows_reads_them_from_a_derived_table() -> None:
    plan = compile_view(
        "v", "SELECT carrier, month, SUM(dep_delay) AS s, SUM(dep_delay) / SUM(SUM(dep_delay)) "
        "OVER (PARTITION BY month) AS share, RANK() OVER (PARTITION BY month ORDER BY "
        "COUNT(*) DESC) AS r FROM flights GROUP BY carrier, month", SCHEMAS)
    assert plan.incremental, plan.reason
    assert plan.columns == ("carrier", "month", "s", "share", "r")
    assert (plan.root.operator, plan.root.law) == ("window", Law.AFFECTED_KEY_RECOMPUTE)
    [derived] = plan.root.children
    assert derived.operator == "derived table" and derived.children[0].operator == "aggregate"
    # the window's parts are columns of the grouped rows: its function stays outside
    assert "SUM(__grouped.__h" in plan.sql and "GROUP BY" not in plan.sql.split(") AS __grouped")[1]


def test_a_top_k_over_a_map_column_is_recomputed() -> None:
    """Spark cannot sort a map, and the top-K law orders rows by every column."""
    schemas = {"t": {"k": "int", "m": "map<string,int>"}}
    plan = compile_view("v", "SELECT k, m FROM t ORDER BY k LIMIT 3", schemas)
    assert not plan.incremental and "cannot sort m (a map)" in str(plan.reason)
    assert compile_view("v", "SELECT k FROM t ORDER BY k LIMIT 3", schemas).incremental


@pytest.mark.parametrize("join", [
    "LEFT OUTER JOIN airlines a ON f.carrier = a.carrier",
    "LEFT JOIN airlines a ON (f.carrier = a.carrier AND f.month > 1)",
])
def test_a_left_join_of_a_multi_table_block_is_maintained_by_affected_join_keys(join: str
                                                                                ) -> None:
    """``LEFT OUTER JOIN`` and a parenthesized ON are the same two-table outer join."""
    plan = compile_view("v", f"SELECT f.origin, a.name, b.name AS other FROM flights f {join} "
                        "JOIN airlines b ON f.carrier = b.carrier", SCHEMAS)
    assert plan.incremental, plan.reason
    assert "left outer join" in explain(plan) and "affected join keys" in explain(plan)


def test_grouping_sets_are_a_union_of_plain_groupings() -> None:
    """ROLLUP (a, b) is three GROUP BYs: (a, b), (a) and the grand total; GROUPING a constant."""
    plan = compile_view("v", "SELECT carrier, month, COUNT(*) AS n, GROUPING(month) AS g "
                        "FROM flights GROUP BY carrier, month WITH ROLLUP", SCHEMAS)
    assert plan.incremental, plan.reason
    assert plan.root.operator == "union all"
    text = explain(plan)
    assert text.count("- aggregate [affected-key recompute]") == 3
    assert "GROUP BY flights.carrier:" in text and "GROUP BY ():" in text
    assert "HAVING COUNT(*) > 0" in plan.sql, "an empty input has no grand total row"


@pytest.mark.parametrize(("group", "branches"), [
    ("ROLLUP (1, 2)", ["GROUP BY flights.carrier, flights.month", "GROUP BY flights.carrier"]),
    ("carrier, month GROUPING SETS ((carrier), (month))",
     ["GROUP BY flights.carrier", "GROUP BY flights.month"]),
    ("GROUPING SETS ((carrier), (carrier))",
     ["GROUP BY flights.carrier", "GROUP BY flights.carrier"]),
])
def test_grouping_sets_resolve_ordinals_keep_hive_lists_and_repeat_sets(
        group: str, branches: list[str]) -> None:
    plan = compile_view("v", f"SELECT carrier, month, COUNT(*) AS n FROM flights GROUP BY {group}",
                        SCHEMAS)
    assert plan.incremental, plan.reason
    parts = plan.sql.split(" FROM flights AS flights ")[1:]
    found = [part.split(" UNION ALL ")[0] for part in parts]
    assert [b for b in found if b.startswith("GROUP BY")][:len(branches)] == branches


def test_a_rolled_up_expression_is_a_typed_null_outside_aggregates_only() -> None:
    plan = compile_view("v", "SELECT month + 1 AS m1, month, SUM(month) FILTER (WHERE month > 1) "
                        "AS s FROM flights GROUP BY ROLLUP (month + 1, month)", SCHEMAS)
    assert "SELECT flights.month + 1 AS m1, CAST(NULL AS INT) AS month, SUM(flights.month) " \
        "FILTER(WHERE flights.month > 1) AS s FROM flights AS flights GROUP BY flights.month + 1" \
        in plan.sql


def test_a_rollup_nested_in_grouping_sets_is_left_alone() -> None:
    plan = compile_view("v", "SELECT carrier, month, COUNT(*) AS n FROM flights "
                        "GROUP BY GROUPING SETS (ROLLUP (carrier, month), origin)", SCHEMAS)
    assert not plan.incremental and "GROUPING SETS" in (plan.reason or "")


def test_an_unknown_function_keeps_grouping_sets_recomputed() -> None:
    """``EVERY`` may be an aggregate sqlglot does not know: its argument must stay as is."""
    plan = compile_view("v", "SELECT carrier, EVERY(month > 1) AS e FROM flights "
                        "GROUP BY ROLLUP (carrier, month)", SCHEMAS)
    assert not plan.incremental and "ROLLUP" in (plan.reason or "")
