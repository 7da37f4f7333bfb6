"""Write docs/sql-coverage.md: which SQL the engine maintains incrementally, and by which laws.

Run from the repository root: ``python -m tests.tpch.coverage`` (compile only, no Spark).
One row per TPC-H query, per construct snippet over the TPC-H schema and per TPC-DS query;
the document is regenerated as the engine grows.
"""

from __future__ import annotations

import argparse
from collections import Counter
from functools import cache
from pathlib import Path

from ivm import IvmError, PlanNode, compile_view
from ivm.engine_rule import LOCAL_LIMITS, local_refusal
from tests.tpcds import workload as tpcds
from tests.tpch.queries import all_queries
from tests.tpch.schema import SCHEMAS

Schemas = dict[str, dict[str, str]]

OUTPUT = Path("docs/sql-coverage.md")

CONSTRUCTS: tuple[tuple[str, str], ...] = (
    ("filter", "SELECT l_orderkey, l_quantity FROM lineitem WHERE l_quantity > 10"),
    ("project (expressions)",
     "SELECT l_orderkey, l_extendedprice * (1 - l_discount) AS net FROM lineitem"),
    ("CASE", "SELECT o_orderkey, CASE WHEN o_orderpriority = '1-URGENT' THEN 1 ELSE 0 END "
             "AS urgent FROM orders"),
    ("casts", "SELECT CAST(o_totalprice AS double) AS price, CAST(o_orderdate AS string) AS d "
              "FROM orders"),
    ("UNION ALL", "SELECT c_nationkey AS k FROM customer UNION ALL "
                  "SELECT s_nationkey AS k FROM supplier"),
    ("UNION", "SELECT c_nationkey AS k FROM customer UNION SELECT s_nationkey AS k FROM supplier"),
    ("INTERSECT", "SELECT c_nationkey AS k FROM customer INTERSECT "
                  "SELECT s_nationkey AS k FROM supplier"),
    ("EXCEPT", "SELECT c_nationkey AS k FROM customer EXCEPT "
               "SELECT s_nationkey AS k FROM supplier"),
    ("DISTINCT", "SELECT DISTINCT o_orderstatus, o_orderpriority FROM orders"),
    ("inner join, 3-way (JOIN ... ON)",
     "SELECT c_name, o_orderkey, l_linenumber FROM customer "
     "JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey"),
    ("inner join, 3-way (comma, WHERE)",
     "SELECT c_name, o_orderkey, l_linenumber FROM customer, orders, lineitem "
     "WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey"),
    ("non-equi join",
     "SELECT o_orderkey, l_linenumber FROM orders JOIN lineitem "
     "ON l_orderkey = o_orderkey AND l_shipdate > o_orderdate + INTERVAL '90' DAY"),
    ("LEFT OUTER JOIN", "SELECT c_custkey, o_orderkey FROM customer "
                        "LEFT OUTER JOIN orders ON c_custkey = o_custkey"),
    ("RIGHT OUTER JOIN", "SELECT c_custkey, o_orderkey FROM orders "
                         "RIGHT OUTER JOIN customer ON c_custkey = o_custkey"),
    ("FULL OUTER JOIN", "SELECT c_custkey, o_orderkey FROM customer "
                        "FULL OUTER JOIN orders ON c_custkey = o_custkey"),
    ("outer join, 3-way (inner, then FULL)",
     "SELECT c_name, o_orderkey, l_linenumber FROM customer JOIN orders ON c_custkey = o_custkey "
     "FULL OUTER JOIN lineitem ON l_orderkey = o_orderkey AND l_quantity > 45"),
    ("outer join, 3-way (RIGHT, then inner)",
     "SELECT c_name, o_orderkey, n_name FROM orders RIGHT OUTER JOIN customer "
     "ON c_custkey = o_custkey JOIN nation ON c_nationkey = n_nationkey"),
    ("outer join, equality and non-equi ON",
     "SELECT c_custkey, o_orderkey FROM customer LEFT OUTER JOIN orders "
     "ON c_custkey = o_custkey AND o_totalprice > c_acctbal * 10"),
    ("outer join, non-equi ON only",
     "SELECT c_custkey, o_orderkey FROM customer LEFT OUTER JOIN orders "
     "ON o_totalprice > c_acctbal * 10"),
    ("GROUP BY COUNT/SUM/AVG",
     "SELECT l_returnflag, COUNT(*) AS n, SUM(l_quantity) AS q, AVG(l_discount) AS d "
     "FROM lineitem GROUP BY l_returnflag"),
    ("GROUP BY MIN/MAX", "SELECT l_returnflag, MIN(l_shipdate) AS first_ship, "
                         "MAX(l_shipdate) AS last_ship FROM lineitem GROUP BY l_returnflag"),
    ("COUNT(DISTINCT)", "SELECT o_orderstatus, COUNT(DISTINCT o_custkey) AS customers "
                        "FROM orders GROUP BY o_orderstatus"),
    ("HAVING", "SELECT o_custkey, COUNT(*) AS n FROM orders GROUP BY o_custkey "
               "HAVING COUNT(*) > 10"),
    ("join + GROUP BY", "SELECT n_name, SUM(o_totalprice) AS total FROM orders "
                        "JOIN customer ON o_custkey = c_custkey "
                        "JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name"),
    ("IN (subquery)", "SELECT o_orderkey FROM orders WHERE o_custkey IN "
                      "(SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING')"),
    ("EXISTS", "SELECT o_orderkey FROM orders WHERE EXISTS "
               "(SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_quantity > 45)"),
    ("NOT EXISTS", "SELECT c_custkey FROM customer WHERE NOT EXISTS "
                   "(SELECT * FROM orders WHERE o_custkey = c_custkey)"),
    ("NOT IN (subquery)", "SELECT ps_partkey, ps_suppkey FROM partsupp WHERE ps_suppkey NOT IN "
                          "(SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Complaints%')"),
    ("NOT IN (correlated subquery)",
     "SELECT o_orderkey FROM orders WHERE o_custkey NOT IN "
     "(SELECT c_custkey FROM customer WHERE c_nationkey = o_orderkey % 25)"),
    ("scalar subquery", "SELECT c_custkey FROM customer WHERE c_acctbal > "
                        "(SELECT AVG(c_acctbal) FROM customer)"),
    ("derived table (subquery in FROM)",
     "SELECT k, COUNT(*) AS n FROM (SELECT o_custkey AS k FROM orders) AS t GROUP BY k"),
    ("window (PARTITION BY)",
     "SELECT o_orderkey, RANK() OVER (PARTITION BY o_custkey ORDER BY o_totalprice DESC) "
     "AS r FROM orders"),
    ("WITH (CTE)", "WITH big AS (SELECT * FROM orders WHERE o_totalprice > 100000) "
                   "SELECT o_orderkey FROM big"),
    ("GROUP BY STDDEV/VARIANCE (_SAMP, _POP)",
     "SELECT o_orderstatus, STDDEV_SAMP(o_totalprice) AS s, STDDEV_POP(o_totalprice) AS p, "
     "VAR_SAMP(o_shippriority) AS v, VAR_POP(o_shippriority) AS w FROM orders "
     "GROUP BY o_orderstatus"),
    ("aggregate FILTER (WHERE ...)",
     "SELECT o_orderstatus, COUNT(*) FILTER (WHERE o_totalprice > 100000) AS big, "
     "SUM(o_totalprice) FILTER (WHERE o_orderpriority = '1-URGENT') AS urgent FROM orders "
     "GROUP BY o_orderstatus"),
    ("window, RANK/DENSE_RANK without PARTITION BY",
     "SELECT o_orderkey, RANK() OVER (ORDER BY o_totalprice DESC) AS r, "
     "DENSE_RANK() OVER (ORDER BY o_orderdate) AS d FROM orders"),
    ("window, ROW_NUMBER without PARTITION BY",
     "SELECT o_orderkey, ROW_NUMBER() OVER (ORDER BY o_totalprice DESC) AS r FROM orders"),
    ("ORDER BY ... LIMIT", "SELECT o_orderkey, o_totalprice FROM orders "
                           "ORDER BY o_totalprice DESC LIMIT 10"),
    ("GROUP BY ... ORDER BY aggregate LIMIT",
     "SELECT o_custkey, SUM(o_totalprice) AS spent FROM orders GROUP BY o_custkey "
     "ORDER BY spent DESC LIMIT 10"),
    ("ORDER BY ... LIMIT ... OFFSET", "SELECT o_orderkey FROM orders "
                                      "ORDER BY o_orderkey LIMIT 10 OFFSET 5"),
    ("rand()", "SELECT o_orderkey, rand() AS r FROM orders"),
)
"""(construct, SQL over the TPC-H schema): one row each in the document."""


def laws(node: PlanNode) -> list[str]:
    """The laws of a plan tree, pre-order, each once."""
    found = [node.law.value]
    for child in node.children:
        found += [law for law in laws(child) if law not in found]
    return found


def row(name: str, sql: str, schemas: Schemas = SCHEMAS) -> tuple[str, str, str, str]:
    """``(incremental, laws, reason, local engine)`` for one view, as document cells."""
    try:
        plan = compile_view(name, sql, schemas)
    except IvmError as error:
        return "error", "", str(error), ""
    refused = local_refusal(plan)
    local = "yes" if refused is None else f"no: {refused}"
    if plan.incremental:
        return "yes", ", ".join(laws(plan.root)), "", local
    return "no", ", ".join(laws(plan.root)), plan.reason or "", local


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """The whole document (Markdown)."""
    lines = [
        "# SQL coverage",
        "",
        "Generated by `python -m tests.tpch.coverage` from what `ivm.compile_view` says today;",
        "do not edit by hand. *Incremental* means every node of the plan is maintained from the",
        "sources' change feeds; otherwise the view is recomputed in full at each refresh and",
        "the reason names the construct at fault.",
        "",
        "*Local engine* says whether small changes run in process on DuckDB, with no Spark",
        f"job (`ivm/engine_rule.py`: {LOCAL_LIMITS}), or why every tick runs on Spark. The",
        "subset of SQL the local engine takes is in `ivm/spark_types.py` (expressions) and",
        "`ivm/local_recompute.py` (aggregates whose affected groups are recomputed);",
        "`tests/integration/test_local_engine.py` and `test_ivm_differential.py` check it",
        "against Spark.",
        "",
        "## TPC-H (22 queries)",
        "",
        "The queries are in `tests/tpch/queries/` (Spark SQL, validation parameters); the",
        "spec's final ORDER BY is dropped unless the query returns the first N rows.",
        "`tests/integration/test_tpch_ivm.py` checks each incremental query against a full",
        "recompute after an RF1+RF2 batch on the local engine (where the plan allows it) and",
        "one on Spark, at SF 0.01 in `make test` (`LAKEHOUSE_TPCH_SF` for another scale",
        "factor). Its last run at SF 0.1 (2026-11-27): 22 of 22 equal after both batches.",
        "",
        "| query | incremental | laws | reason | local engine |",
        "| --- | --- | --- | --- | --- |",
    ]
    queries = all_queries()
    for query in queries:
        cells = row(query.name, query.sql)
        lines.append(f"| {query.title} | {' | '.join(_cell(c) for c in cells)} |")
    count = sum(row(q.name, q.sql)[0] == "yes" for q in queries)
    lines += ["", f"Incremental today: {count} of {len(queries)}.", "",
              "## Constructs", "", "Small views over the TPC-H schema, one construct each.", "",
              "| construct | SQL | incremental | laws | reason | local engine |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, sql in CONSTRUCTS:
        cells = row(name.split(" ")[0].lower(), sql)
        lines.append(f"| {_cell(name)} | `{_cell(sql)}` | "
                     f"{' | '.join(_cell(c) for c in cells)} |")
    return "\n".join([*lines, *_tpcds()]) + "\n"


@cache
def _tpcds() -> tuple[str, ...]:
    """The TPC-DS section: one row per query, the count, and the reasons for the rest.

    Compiled once per process (99 queries take some 20 s).
    """
    schemas = tpcds.schemas()
    rows = [(query.name, row(query.name, query.sql, schemas)) for query in tpcds.queries()]
    reasons = Counter(cells[2].split(":")[0] for _, cells in rows if cells[0] != "yes")
    lines = ["", "## TPC-DS (99 queries)", "",
             "The queries and the schema are DuckDB's `tpcds` extension's",
             "(`tests/tpcds/workload.py`), transpiled to Spark SQL by sqlglot.",
             "`tests/integration/test_tpcds_ivm.py` checks each incremental query's ticks",
             "against a full recompute at SF 0.01, over two batches of inserts, deletes and",
             "updates (`tests/tpcds/data.py`): six queries in `make test`, all in `make tpcds`.",
             "Its last full run (2026-11-27, in four parts): each of the 99 equal to the",
             "recompute after each batch; the longest, q14, 220 s on 2 cores. That a batch",
             "changed the view is asserted for the six of `make test` only.",
             "An ORDER BY without LIMIT is dropped (a view has no order).", "",
             f"Incremental today: {sum(cells[0] == 'yes' for _, cells in rows)} of {len(rows)}."
             + (" Not incremental, by reason:" if reasons else ""), ""]
    lines += [f"- {_cell(reason)}: {count}" for reason, count in reasons.most_common()]
    lines += [""] if reasons else []
    lines += ["| query | incremental | laws | reason | local engine |",
              "| --- | --- | --- | --- | --- |"]
    lines += [f"| {name} | {' | '.join(_cell(c) for c in cells)} |" for name, cells in rows]
    return tuple(lines)


def main() -> None:
    """Write the document (``--output`` to choose where)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    args.output.write_text(render())
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
