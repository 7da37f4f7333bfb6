"""Table routes: list, create, load, exists, commit, drop, rename, register, metrics, commit-all."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query, Response, status
from pyiceberg.catalog.rest import ListTableResponseEntry, ListTablesResponse, TableResponse
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import CommitTableResponse

from catalog_api.api.routes.credentials import VendorDep
from catalog_api.api.routes.responses import json_response
from catalog_api.credentials import ACCESS_DELEGATION_HEADER
from catalog_api.deps import NamespaceDep, StoreDep
from catalog_api.models import (
    CommitTransactionBody,
    CreateTableBody,
    RegisterTableBody,
    RenameTableBody,
    UpdateTableBody,
)
from catalog_api.store import TableChangeRequest

router = APIRouter(prefix="/v1", tags=["Catalog API"])

TABLE_PATH = "/namespaces/{namespace}/tables/{table}"
NO_CONTENT = status.HTTP_204_NO_CONTENT
DelegationHeader = Annotated[str | None, Header(alias=ACCESS_DELEGATION_HEADER)]


@router.get(
    "/namespaces/{namespace}/tables", response_model=ListTablesResponse, summary="List tables"
)
def list_tables(store: StoreDep, namespace: NamespaceDep) -> Response:
    """List the tables of a namespace."""
    entries = [
        ListTableResponseEntry(namespace=ident[:-1], name=ident[-1])
        for ident in store.list_tables(namespace)
    ]
    return json_response(ListTablesResponse(identifiers=entries))


@router.post(
    "/namespaces/{namespace}/tables", response_model=TableResponse, summary="Create a table"
)
def create_table(
    store: StoreDep,
    vendor: VendorDep,
    namespace: NamespaceDep,
    body: CreateTableBody,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Create a table, or start a create transaction when ``stage-create`` is true."""
    return json_response(vendor.decorate(store.create_table(namespace, body), access_delegation))


@router.post(
    "/namespaces/{namespace}/register",
    response_model=TableResponse,
    summary="Register a table from a metadata file",
)
def register_table(
    store: StoreDep,
    vendor: VendorDep,
    namespace: NamespaceDep,
    body: RegisterTableBody,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Register an existing metadata file under a table name."""
    response = store.register_table(namespace, body.name, body.metadata_location, body.overwrite)
    return json_response(vendor.decorate(response, access_delegation))


@router.get(TABLE_PATH, response_model=TableResponse, summary="Load a table")
def load_table(
    store: StoreDep,
    vendor: VendorDep,
    namespace: NamespaceDep,
    table: str,
    snapshots: Annotated[Literal["all", "refs"], Query()] = "all",
    access_delegation: DelegationHeader = None,
) -> Response:
    """Return the table's metadata location, metadata, client config (and credentials)."""
    response = store.load_table((*namespace, table), snapshots)
    return json_response(vendor.decorate(response, access_delegation))


@router.head(TABLE_PATH, status_code=NO_CONTENT, summary="Check if a table exists")
def table_exists(store: StoreDep, namespace: NamespaceDep, table: str) -> Response:
    """Answer 204 when the table exists, 404 otherwise."""
    exists = store.table_exists((*namespace, table))
    return Response(status_code=NO_CONTENT if exists else status.HTTP_404_NOT_FOUND)


@router.post(TABLE_PATH, response_model=CommitTableResponse, summary="Commit updates to a table")
def commit_table(
    store: StoreDep, namespace: NamespaceDep, table: str, body: UpdateTableBody
) -> Response:
    """Check the requirements and apply the updates atomically (409 when a requirement fails)."""
    identifier = (*namespace, table)
    change = TableChangeRequest(identifier, body.requirements, body.updates)
    return json_response(store.commit_table(change))


@router.delete(TABLE_PATH, status_code=NO_CONTENT, summary="Drop a table")
def drop_table(
    store: StoreDep,
    namespace: NamespaceDep,
    table: str,
    purge_requested: Annotated[bool, Query(alias="purgeRequested")] = False,
) -> Response:
    """Drop a table; with ``purgeRequested`` also delete its data and metadata files."""
    store.drop_table((*namespace, table), purge=purge_requested)
    return Response(status_code=NO_CONTENT)


@router.post(f"{TABLE_PATH}/metrics", status_code=NO_CONTENT, summary="Send a metrics report")
def report_metrics(
    store: StoreDep, namespace: NamespaceDep, table: str, body: Annotated[dict[str, Any], Body()]
) -> Response:
    """Accept a scan or commit metrics report (not stored yet)."""
    if not store.table_exists((*namespace, table)):
        raise NoSuchTableError(f"Table does not exist: {'.'.join((*namespace, table))}")
    return Response(status_code=NO_CONTENT)


@router.post("/tables/rename", status_code=NO_CONTENT, summary="Rename a table")
def rename_table(store: StoreDep, body: RenameTableBody) -> Response:
    """Rename a table, possibly moving it to another namespace."""
    source = (*body.source.namespace.root, body.source.name)
    destination = (*body.destination.namespace.root, body.destination.name)
    store.rename_table(source, destination)
    return Response(status_code=NO_CONTENT)


@router.post("/transactions/commit", status_code=NO_CONTENT, summary="Commit several tables")
def commit_transaction(store: StoreDep, body: CommitTransactionBody) -> Response:
    """Commit changes to several tables atomically: all of them or none."""
    changes = [
        TableChangeRequest(
            (*change.identifier.namespace.root, change.identifier.name),
            change.requirements,
            change.updates,
        )
        for change in body.table_changes
    ]
    store.commit_transaction(changes)
    return Response(status_code=NO_CONTENT)
