"""Trino reads the views through the catalog: listing, contents, time travel, snapshots.

The pipeline keeps a grouped view of an Iceberg source and a view over that view fresh over
three ticks of inserts and deletes; then a real Trino 476 (``tests/conftest_trino.py``), whose
Iceberg catalog is the session's REST catalog, reads them. Trino's answers are compared with
the pipeline's own full recompute and with what pyiceberg reads from the same snapshots.

Trino also reads a table pyiceberg wrote in the secure test catalog, through its catalog
``secure`` (OAuth2 client credentials of the ``reader`` client); its catalog
``secure_anonymous``, without credentials, gets 401.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
import trino
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from lakehouse.config import ViewConfig, parse_config
from lakehouse.runtime import Runtime
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle, SecureCatalogHandle
from tests.conftest_trino import (
    ANONYMOUS_CATALOG,
    SECURE_CATALOG,
    TrinoServerHandle,
    catalog_properties,
    oauth2_properties,
    properties_text,
)

CLIENTS_DOC = Path(__file__).parents[2] / "docs" / "clients.md"
DOC_CATALOG_URI = "http://127.0.0.1:8181/iceberg"
DOC_CREDENTIAL = "trino:<secret>"
TOTALS_SQL = ("SELECT customer, COUNT(*) AS orders, SUM(amount) AS total, AVG(amount) AS mean "
              "FROM orders GROUP BY customer")
BIG_SQL = "SELECT customer, total FROM totals WHERE total > 25"
TICKS = (
    ["INSERT INTO {t} VALUES (1, 'ann', 10), (2, 'bob', 5), (3, 'ann', 15), (4, 'cy', 30)"],
    ["INSERT INTO {t} VALUES (5, 'bob', 20), (6, 'dee', 7)", "DELETE FROM {t} WHERE id = 4"],
    ["DELETE FROM {t} WHERE customer = 'dee'", "INSERT INTO {t} VALUES (7, 'ann', 1)"],
)


@dataclass(frozen=True)
class Refreshed:
    """The views after the ticks, their full recomputes, and ``totals``' snapshot per tick."""

    namespace: str
    totals: ViewConfig
    big: ViewConfig
    recomputed: dict[str, pa.Table]
    tick_snapshots: tuple[int, ...]


def _config_data(server: CatalogServerHandle, namespace: str) -> dict[str, object]:
    return {
        "warehouse": str(server.warehouse),
        "catalog": {"embedded": False, "uri": server.uri},
        "sources": {"orders": {"iceberg": f"{namespace}.orders"},
                    "totals": {"view": f"{namespace}.totals"}},
        "views": [
            {"name": f"{namespace}.totals", "sql": TOTALS_SQL, "sinks": ["iceberg"],
             "refresh": "incremental"},
            {"name": f"{namespace}.big", "sql": BIG_SQL, "sinks": ["iceberg"],
             "refresh": "incremental"},
        ],
    }


@pytest.fixture(scope="module")
def refreshed(spark: SparkSession, catalog_server: CatalogServerHandle) -> Iterator[Refreshed]:
    """Both views refreshed after each of :data:`TICKS` (copy-on-write source), once."""
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    catalog = RestCatalog("trino-test", uri=catalog_server.uri)
    catalog.create_namespace(namespace)
    orders = f"lakehouse.{namespace}.orders"
    spark.sql(f"CREATE TABLE {orders} (id int, customer string, amount bigint) USING iceberg "
              "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'copy-on-write')")
    with Runtime(parse_config(_config_data(catalog_server, namespace))) as runtime:
        totals = runtime.config.view(f"{namespace}.totals")
        big = runtime.config.view(f"{namespace}.big")
        snapshots = []
        for statements in TICKS:
            for statement in statements:
                spark.sql(statement.format(t=orders))
            runtime.refresh(big)  # refreshes totals first
            snapshots.append(catalog.load_table(totals.name).metadata.current_snapshot_id)
        recomputed = {view.name: runtime.recompute(view) for view in (totals, big)}
        yield Refreshed(namespace, totals, big, recomputed, tuple(snapshots))


def _columns(refreshed: Refreshed, view: ViewConfig) -> Sequence[str]:
    return refreshed.recomputed[view.name].column_names


def _select(refreshed: Refreshed, view: ViewConfig, suffix: str = "") -> str:
    table = view.name.rsplit(".", 1)[1]
    return (f"SELECT {', '.join(_columns(refreshed, view))} "
            f"FROM {refreshed.namespace}.{table}{suffix}")


def _expected(refreshed: Refreshed, view: ViewConfig) -> Counter[tuple[object, ...]]:
    return multiset(tuple(row.values()) for row in refreshed.recomputed[view.name].to_pylist())


@pytest.mark.spark
def test_trino_lists_and_reads_each_view(trino_server: TrinoServerHandle,
                                         refreshed: Refreshed) -> None:
    schemas = {row[0] for row in trino_server.query("SHOW SCHEMAS")}
    assert refreshed.namespace in schemas
    tables = {row[0] for row in trino_server.query(f"SHOW TABLES FROM {refreshed.namespace}")}
    assert tables == {"orders", "totals", "big"}
    for view in (refreshed.totals, refreshed.big):
        expected = _expected(refreshed, view)
        assert sum(expected.values()) > 0, view.name
        assert multiset(trino_server.query(_select(refreshed, view))) == expected, view.name


@pytest.mark.spark
def test_trino_reads_the_view_on_a_view_as_a_filter_of_its_source(
    trino_server: TrinoServerHandle, refreshed: Refreshed,
) -> None:
    totals = trino_server.query(_select(refreshed, refreshed.totals))
    big = trino_server.query(_select(refreshed, refreshed.big))
    assert len(big) < len(totals)  # the filter drops some groups
    assert multiset(big) == multiset((customer, total) for customer, _, total, _ in totals
                                     if total > 25)


@pytest.mark.spark
def test_trino_time_travels_to_an_older_snapshot(
    trino_server: TrinoServerHandle, refreshed: Refreshed, rest_catalog: RestCatalog,
) -> None:
    older = refreshed.tick_snapshots[0]
    columns = _columns(refreshed, refreshed.totals)
    scan = rest_catalog.load_table(refreshed.totals.name).scan(snapshot_id=older,
                                                                selected_fields=tuple(columns))
    then = multiset(tuple(row[c] for c in columns) for row in scan.to_arrow().to_pylist())
    assert then != _expected(refreshed, refreshed.totals)  # the view changed since
    travelled = trino_server.query(_select(refreshed, refreshed.totals,
                                             f" FOR VERSION AS OF {older}"))
    assert multiset(travelled) == then


@pytest.mark.spark
def test_trino_snapshots_table_matches_pyiceberg_and_carries_the_frontier(
    trino_server: TrinoServerHandle, refreshed: Refreshed, rest_catalog: RestCatalog,
) -> None:
    table = rest_catalog.load_table(refreshed.totals.name)
    frontiers = {s.snapshot_id: (s.summary or {}).get("lakehouse.frontier")
                 for s in table.snapshots()}
    assert set(refreshed.tick_snapshots) <= set(frontiers)
    rows = trino_server.query("SELECT snapshot_id, element_at(summary, 'lakehouse.frontier') "
                                f'FROM {refreshed.namespace}."totals$snapshots"')
    assert sorted(snapshot for snapshot, _ in rows) == sorted(frontiers)
    assert dict(rows) == frontiers
    assert all(frontiers[snapshot] for snapshot in refreshed.tick_snapshots)


def test_the_clients_doc_shows_the_catalog_properties_the_tests_use() -> None:
    doc = CLIENTS_DOC.read_text().splitlines()
    for line in properties_text(catalog_properties(DOC_CATALOG_URI)).splitlines():
        assert line in doc, f"docs/clients.md lacks the Trino catalog property line {line!r}"


def test_the_clients_doc_shows_the_oauth2_properties_the_tests_use() -> None:
    doc = CLIENTS_DOC.read_text().splitlines()
    for line in properties_text(oauth2_properties(DOC_CATALOG_URI, DOC_CREDENTIAL)).splitlines():
        assert line in doc, f"docs/clients.md lacks the Trino OAuth2 property line {line!r}"


# --------------------------------------------------------------------- authentication


@pytest.fixture(scope="module")
def secure_table(secure_catalog_server: SecureCatalogHandle) -> tuple[str, pa.Table]:
    """A namespace of the secure catalog and the rows of its table ``t``, written by pyiceberg."""
    handle = secure_catalog_server
    admin = RestCatalog("admin", uri=handle.uri, credential=handle.credential("admin"),
                        **{"oauth2-server-uri": f"{handle.uri}/v1/oauth/tokens"})
    namespace = f"trino_auth_{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    admin.create_table(f"{namespace}.t", rows.schema).append(rows)
    return namespace, rows


def test_trino_with_a_credential_lists_and_reads(
    trino_server: TrinoServerHandle, secure_table: tuple[str, pa.Table],
) -> None:
    namespace, rows = secure_table
    schemas = {row[0] for row in trino_server.query(f"SHOW SCHEMAS FROM {SECURE_CATALOG}")}
    assert namespace in schemas
    tables = trino_server.query(f"SHOW TABLES FROM {SECURE_CATALOG}.{namespace}")
    assert tables == [["t"]]
    selected = trino_server.query(f"SELECT id, v FROM {SECURE_CATALOG}.{namespace}.t")
    assert multiset(selected) == multiset(tuple(row.values()) for row in rows.to_pylist())


def test_trino_without_credentials_gets_401(
    trino_server: TrinoServerHandle, secure_table: tuple[str, pa.Table],
) -> None:
    namespace, _ = secure_table
    for sql in (f"SHOW SCHEMAS FROM {ANONYMOUS_CATALOG}",
                f"SELECT id FROM {ANONYMOUS_CATALOG}.{namespace}.t"):
        with pytest.raises(trino.exceptions.TrinoQueryError) as refused:
            trino_server.query(sql)
        assert refused.value.error_name == "ICEBERG_CATALOG_ERROR", sql
        assert ("org.apache.iceberg.exceptions.NotAuthorizedException",
                "Not authorized: Authentication required: send a bearer token"
                ) in _causes(refused.value), sql


def _causes(error: trino.exceptions.TrinoQueryError) -> list[tuple[str, str]]:
    """The type and message of the Java exception Trino failed with and of each cause."""
    causes, failure = [], error.failure_info
    while failure:
        causes.append((failure["type"], failure.get("message", "")))
        failure = failure.get("cause")
    return causes
