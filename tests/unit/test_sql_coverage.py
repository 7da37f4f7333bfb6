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


def test_rows_say_why_not_incremental() -> None:
    assert row("f", "SELECT l_orderkey FROM lineitem WHERE l_quantity > 10") == (
        "yes", "linear, change feed", "")
    incremental, laws, reason = row("r", "SELECT o_orderkey, rand() AS r FROM orders")
    assert (incremental, laws.split(", ")[0]) == ("no", "full recompute")
    assert "non-deterministic" in reason
    assert row("e", "SELECT nope FROM orders")[0] == "error"
