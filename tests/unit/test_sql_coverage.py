"""docs/sql-coverage.md is generated from the engine: it must match what the engine says now."""

from __future__ import annotations

from pathlib import Path

from tests.tpch.coverage import CONSTRUCTS, OUTPUT, render, row

ROOT = Path(__file__).resolve().parents[2]


def test_document_is_current() -> None:
    assert (ROOT / OUTPUT).read_text() == render(), (
        "docs/sql-coverage.md is stale: run `python -m tests.tpch.coverage` and commit it")


def test_document_has_every_query_and_construct() -> None:
    text = render()
    assert sum(line.startswith("| TPC-H Q") for line in text.splitlines()) == 22
    for name, _ in CONSTRUCTS:
        assert f"| {name} |" in text
    tpcds = [line for line in text.splitlines() if line.startswith("| q") and line[3].isdigit()]
    assert len(tpcds) == 99 and all(line.split(" | ")[1] in ("yes", "no") for line in tpcds)


def test_rows_say_why_not_incremental() -> None:
    assert row("f", "SELECT l_orderkey FROM lineitem WHERE l_quantity > 10")[:3] == (
        "yes", "linear, change feed", "")
    incremental, laws, reason, local = row("r", "SELECT o_orderkey, rand() AS r FROM orders")
    assert (incremental, laws.split(", ")[0]) == ("no", "full recompute")
    assert "non-deterministic" in reason
    assert local == "no: a full recompute runs on Spark"
    assert row("e", "SELECT nope FROM orders")[0] == "error"


def test_rows_say_which_views_the_local_engine_takes() -> None:
    """The verdict of ivm.engine_rule: the aggregated block's SQL decides, with a reason."""
    sums = "SELECT l_returnflag, SUM(l_quantity * (1 - l_discount)) AS q FROM lineitem"
    assert row("s", f"{sums} WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag"
               )[3] == "yes"
    refused = row("u", f"{sums} WHERE upper(l_comment) = 'X' GROUP BY l_returnflag")[3]
    assert refused == "no: Upper is not taken by the local engine"
    having = row("h", f"{sums} GROUP BY l_returnflag HAVING SUM(l_quantity) > 3")[3]
    assert having.startswith("no: an output computed from aggregates, or HAVING")
    assert row("m", "SELECT l_returnflag, MAX(l_quantity) AS q FROM lineitem "
                    "GROUP BY l_returnflag")[3] == "yes"  # affected groups recomputed locally
    assert "an average of decimals" in row(
        "a", "SELECT l_returnflag, MIN(l_tax) AS t, AVG(l_quantity) AS q FROM lineitem "
             "GROUP BY l_returnflag")[3]
