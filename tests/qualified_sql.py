"""Qualified sqlglot trees for the unit tests of the rewrite rules, as the compiler makes them."""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify


def qualified_select(sql: str, schema: Mapping[str, Mapping[str, str]]) -> exp.Select:
    """``sql`` (Spark SQL, one SELECT block at the top) parsed and qualified against ``schema``."""
    query = qualify(sqlglot.parse_one(sql, dialect="spark"),
                    schema={name: dict(columns) for name, columns in schema.items()},
                    dialect="spark", quote_identifiers=False)
    assert isinstance(query, exp.Select)
    return query
