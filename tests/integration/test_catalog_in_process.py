"""The catalog in its caller's process (catalog_api.in_process): the service's store and rules.

Each test writes through an ``InProcessCatalog`` on the database of a running service and
reads the result back through that service's REST API (pyiceberg's ``RestCatalog``): the
two are one catalog. The refusals are the store's rules, which pyiceberg's own
``SqlCatalog`` on the same database does not apply.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table.update import AssertTableUUID, SetLocationUpdate

from catalog_api.generic_table_models import CreateGenericTableRequest
from catalog_api.in_process import InProcessCatalog
from tests.conftest_catalog import CatalogServerHandle

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


@pytest.fixture
def in_process(catalog_server: CatalogServerHandle) -> Iterator[InProcessCatalog]:
    catalog = InProcessCatalog(catalog_server.settings)
    yield catalog
    catalog.close()


@pytest.fixture
def namespace(in_process: InProcessCatalog) -> str:
    name = f"in_process_{uuid.uuid4().hex[:8]}"
    in_process.create_namespace(name)
    return name


def test_a_table_written_in_process_is_the_one_the_service_serves(
    in_process: InProcessCatalog, rest_catalog: RestCatalog, namespace: str,
) -> None:
    table = in_process.create_table(f"{namespace}.t", ROWS.schema)
    table.append(ROWS)
    table.append(ROWS.slice(0, 1))
    served = rest_catalog.load_table(f"{namespace}.t")
    assert served.metadata_location == in_process.load_table(f"{namespace}.t").metadata_location
    assert [s.snapshot_id for s in served.snapshots()] == \
        [s.snapshot_id for s in table.snapshots()]
    assert sorted(served.scan().to_arrow()["id"].to_pylist()) == [1, 1, 2, 3]
    assert (namespace,) in rest_catalog.list_namespaces()


def test_a_location_outside_the_warehouse_is_refused_as_the_service_refuses_it(
    in_process: InProcessCatalog, catalog_server: CatalogServerHandle, namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    outside = tmp_path_factory.mktemp("outside").as_uri()
    with pytest.raises(BadRequestError, match="outside the warehouse"):
        in_process.create_table(f"{namespace}.escapes", ROWS.schema, location=outside)
    assert not in_process.table_exists(f"{namespace}.escapes")
    # pyiceberg's own SqlCatalog on the same database has no such rule
    plain = SqlCatalog(catalog_server.settings.catalog_name, uri=catalog_server.database_url,
                       warehouse=catalog_server.settings.warehouse)
    plain.create_table(f"{namespace}.escapes", ROWS.schema, location=outside)
    plain.engine.dispose()


def test_a_commit_on_a_stale_table_is_refused_and_changes_nothing(
    in_process: InProcessCatalog, rest_catalog: RestCatalog, namespace: str,
) -> None:
    table = in_process.create_table(f"{namespace}.t", ROWS.schema)
    before = rest_catalog.load_table(f"{namespace}.t").metadata_location
    with pytest.raises(CommitFailedException):
        in_process.commit_table(table, (AssertTableUUID(uuid=uuid.uuid4()),), ())
    assert rest_catalog.load_table(f"{namespace}.t").metadata_location == before


def test_create_table_if_not_exists_keeps_the_first(
    in_process: InProcessCatalog, namespace: str,
) -> None:
    first = in_process.create_table(f"{namespace}.t", ROWS.schema)
    again = in_process.create_table_if_not_exists(f"{namespace}.t", ROWS.schema)
    assert again.metadata.table_uuid == first.metadata.table_uuid
    with pytest.raises(TableAlreadyExistsError):
        in_process.create_table(f"{namespace}.t", ROWS.schema)


def test_a_generic_table_is_listed_once_and_reserves_its_location(
    in_process: InProcessCatalog, catalog_server: CatalogServerHandle, namespace: str,
) -> None:
    location = (catalog_server.warehouse / namespace / "copy").as_uri()
    request = CreateGenericTableRequest.model_validate(
        {"name": "copy", "format": "delta", "base-location": location})
    assert in_process.register_generic_table((namespace,), request)
    assert not in_process.register_generic_table((namespace,), request)  # kept as it is
    base = f"{catalog_server.uri}/polaris/v1/namespaces/{namespace}/generic-tables"
    listed = httpx.get(base).json()["identifiers"]
    assert [entry["name"] for entry in listed] == ["copy"]
    served = httpx.get(f"{base}/copy").json()["table"]
    assert (served["format"], served["base-location"]) == ("delta", location)
    with pytest.raises(BadRequestError, match="overlaps"):
        in_process.create_table(f"{namespace}.inside", ROWS.schema, location=f"{location}/t")


def test_a_commit_moving_the_table_out_of_the_warehouse_is_refused(
    in_process: InProcessCatalog, rest_catalog: RestCatalog, catalog_server: CatalogServerHandle,
    namespace: str, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    table = in_process.create_table(f"{namespace}.t", ROWS.schema)
    before = rest_catalog.load_table(f"{namespace}.t").metadata_location
    outside = tmp_path_factory.mktemp("outside").as_uri()
    with pytest.raises(BadRequestError, match="outside the warehouse"):
        in_process.commit_table(table, (AssertTableUUID(uuid=table.metadata.table_uuid),),
                                (SetLocationUpdate(location=outside),))
    assert rest_catalog.load_table(f"{namespace}.t").metadata_location == before
    # pyiceberg's own SqlCatalog commits the same change to the same table
    plain = SqlCatalog(catalog_server.settings.catalog_name, uri=catalog_server.database_url,
                       warehouse=catalog_server.settings.warehouse)
    plain.commit_table(plain.load_table(f"{namespace}.t"),
                       (AssertTableUUID(uuid=table.metadata.table_uuid),),
                       (SetLocationUpdate(location=outside),))
    assert plain.load_table(f"{namespace}.t").location() == outside
    plain.engine.dispose()


def test_a_staged_create_goes_through_the_store(
    in_process: InProcessCatalog, rest_catalog: RestCatalog, namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    outside = tmp_path_factory.mktemp("outside").as_uri()
    with pytest.raises(BadRequestError, match="outside the warehouse"):
        in_process.create_table_transaction(
            f"{namespace}.staged", ROWS.schema, location=outside).commit_transaction()
    assert not rest_catalog.table_exists(f"{namespace}.staged")
    with in_process.create_table_transaction(f"{namespace}.staged", ROWS.schema) as create:
        create.set_properties(owner="pipeline")
    assert rest_catalog.load_table(f"{namespace}.staged").properties["owner"] == "pipeline"


def test_the_catalog_database_cannot_be_destroyed_through_it(
    in_process: InProcessCatalog, rest_catalog: RestCatalog, namespace: str,
) -> None:
    in_process.create_table(f"{namespace}.t", ROWS.schema)
    with pytest.raises(NotImplementedError):
        in_process.destroy_tables()
    assert rest_catalog.table_exists(f"{namespace}.t")


def test_a_metadata_file_is_parsed_once_and_a_change_is_seen_at_the_next_load(
    in_process: InProcessCatalog, rest_catalog: RestCatalog, namespace: str,
) -> None:
    identifier = f"{namespace}.t"
    in_process.create_table(identifier, ROWS.schema).append(ROWS)
    first, second = in_process.load_table(identifier), in_process.load_table(identifier)
    assert second.metadata is first.metadata and second is not first
    rest_catalog.load_table(identifier).append(ROWS)  # another client's commit
    changed = in_process.load_table(identifier)
    assert changed.metadata_location != first.metadata_location
    assert changed.scan().to_arrow().num_rows == 6
    assert first.scan().to_arrow().num_rows == 3  # a load is a snapshot of the metadata
    in_process.drop_table(identifier)
    with pytest.raises(NoSuchTableError):
        in_process.load_table(identifier)


def test_the_metadata_a_commit_writes_is_kept_parsed_for_the_next_load_and_commit(
    in_process: InProcessCatalog, namespace: str,
) -> None:
    identifier = f"{namespace}.t"
    writer = in_process.create_table(identifier, ROWS.schema)
    writer.append(ROWS)
    loaded = in_process.load_table(identifier)
    assert loaded.metadata is writer.metadata  # the commit's own metadata, not re-parsed
    loaded.append(ROWS)  # its base comes from the store's parsed metadata
    assert in_process.load_table(identifier).scan().to_arrow().num_rows == 6
