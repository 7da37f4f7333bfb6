"""The pipeline's REST client sends the last answer's ETag: a real catalog server on loopback.

An unchanged table is answered 304 and reuses the metadata already parsed; a change made
by another client, or through a loaded ``Table``, is seen at the next load.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from lakehouse.rest_catalog import ConditionalRestCatalog
from tests.conftest_catalog import CatalogServerHandle

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
ROWS = pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA)


def _client(server: CatalogServerHandle, **properties: str) -> tuple[RestCatalog, list[int]]:
    """A conditional client and the status codes of its table loads, in order."""
    client = ConditionalRestCatalog("conditional", uri=server.uri, **properties)
    statuses: list[int] = []

    def _seen(response: Any, *args: Any, **kwargs: Any) -> None:
        if response.request.method == "GET" and "/tables/" in response.request.url:
            statuses.append(response.status_code)

    client._session.hooks["response"].append(_seen)  # noqa: SLF001 - requests' public hook
    return client, statuses


def test_an_unchanged_table_is_answered_304_and_its_metadata_reused(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    identifier = f"{catalog_namespace}.t"
    rest_catalog.create_table(identifier, SCHEMA).append(ROWS)
    client, statuses = _client(catalog_server)
    first, second = client.load_table(identifier), client.load_table(identifier)
    assert statuses == [200, 304]
    assert second.metadata is first.metadata  # parsed once
    assert second is not first  # each load its own Table
    assert second.scan().to_arrow().num_rows == 2


def test_a_change_by_another_client_is_seen_at_the_next_load(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    identifier = f"{catalog_namespace}.t"
    rest_catalog.create_table(identifier, SCHEMA).append(ROWS)
    client, statuses = _client(catalog_server)
    before = client.load_table(identifier).metadata.current_snapshot_id
    rest_catalog.load_table(identifier).append(ROWS)
    after = client.load_table(identifier)
    assert statuses == [200, 200]
    assert after.metadata.current_snapshot_id != before
    assert after.scan().to_arrow().num_rows == 4
    client.load_table(identifier)
    assert statuses == [200, 200, 304]


def test_a_commit_through_a_reused_table_leaves_the_other_loads_alone(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    identifier = f"{catalog_namespace}.t"
    rest_catalog.create_table(identifier, SCHEMA).append(ROWS)
    client, statuses = _client(catalog_server)
    kept, writer = client.load_table(identifier), client.load_table(identifier)
    writer.append(ROWS)
    assert kept.metadata.current_snapshot_id != writer.metadata.current_snapshot_id
    assert kept.scan().to_arrow().num_rows == 2  # a load is a snapshot of the metadata
    fresh = client.load_table(identifier)
    assert statuses == [200, 304, 304]  # the commit's answer is the next load's
    assert fresh.metadata is writer.metadata
    assert fresh.scan().to_arrow().num_rows == 4


def test_a_commit_answer_is_remembered_only_while_it_is_the_tables_metadata(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    identifier = f"{catalog_namespace}.t"
    rest_catalog.create_table(identifier, SCHEMA).append(ROWS)
    client, statuses = _client(catalog_server)
    client.load_table(identifier).append(ROWS)
    rest_catalog.load_table(identifier).append(ROWS)  # another client commits after it
    seen = client.load_table(identifier)
    assert statuses == [200, 200]
    assert seen.scan().to_arrow().num_rows == 6


def test_a_dropped_table_is_not_answered_from_memory(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    identifier = f"{catalog_namespace}.t"
    rest_catalog.create_table(identifier, SCHEMA)
    client, _ = _client(catalog_server)
    client.load_table(identifier)
    rest_catalog.drop_table(identifier)
    with pytest.raises(NoSuchTableError):
        client.load_table(identifier)


def test_each_snapshot_mode_has_its_own_etag(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    identifier = f"{catalog_namespace}.t"
    table = rest_catalog.create_table(identifier, SCHEMA)
    table.append(ROWS)
    table.append(ROWS)
    everything, _ = _client(catalog_server)
    refs, statuses = _client(catalog_server, **{"snapshot-loading-mode": "refs"})
    assert len(everything.load_table(identifier).metadata.snapshots) == 2
    assert len(refs.load_table(identifier).metadata.snapshots) == 1
    assert len(refs.load_table(identifier).metadata.snapshots) == 1
    assert statuses == [200, 304]
