"""Table routes: list, create, load, exists, commit, drop, rename, register, commit-all."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Response, status
from pyiceberg.catalog.rest import ListTablesResponse, TableResponse
from pyiceberg.table import CommitTableResponse
from pyiceberg.typedef import Identifier

from catalog_api.api.routes.credentials import VendorDep
from catalog_api.api.routes.responses import json_response
from catalog_api.api.routes.signing import SignerDep
from catalog_api.credentials import ACCESS_DELEGATION_HEADER, CredentialVendor
from catalog_api.deps import PrincipalDep, ReadableNamespace, StoreDep, WritableNamespace
from catalog_api.etags import ETAG_HEADER, matches_if_none_match, not_modified, table_etag
from catalog_api.models import (
    CommitTransactionBody,
    CreateTableBody,
    RegisterTableBody,
    RenameTableBody,
    UpdateTableBody,
)
from catalog_api.paging import PageDep, paged_json
from catalog_api.security import Principal, Role
from catalog_api.signing import RemoteSigner
from catalog_api.store import TableChangeRequest

router = APIRouter(prefix="/v1", tags=["Catalog API"])

TABLE_PATH = "/namespaces/{namespace}/tables/{table}"
NO_CONTENT = status.HTTP_204_NO_CONTENT
DelegationHeader = Annotated[str | None, Header(alias=ACCESS_DELEGATION_HEADER)]


def _delegated(
    vendor: CredentialVendor,
    signer: RemoteSigner,
    principal: Principal,
    response: TableResponse,
    access_delegation: str | None,
    identifier: Identifier,
) -> TableResponse:
    """The answer with vended credentials, or else remote-signing config, when asked for.

    Vended credentials are read-only unless the caller may write the table.
    """
    if vendor.applies(access_delegation):
        writable = principal.can(identifier[:-1], Role.WRITER)
        return vendor.decorate(response, access_delegation, writable)
    return signer.decorate(response, access_delegation, identifier)


def _with_etag(
    model: TableResponse | CommitTableResponse, snapshots: str = "all"
) -> Response:
    response = json_response(model)
    if model.metadata_location:
        response.headers[ETAG_HEADER] = table_etag(model.metadata_location, snapshots)
    return response


@router.get(
    "/namespaces/{namespace}/tables", response_model=ListTablesResponse, summary="List tables"
)
def list_tables(store: StoreDep, namespace: ReadableNamespace, page: PageDep) -> Response:
    """List the tables of a namespace, paginated."""
    identifiers, next_token = page.apply(store.list_tables(namespace), key=lambda i: i[-1])
    entries = [{"namespace": list(ident[:-1]), "name": ident[-1]} for ident in identifiers]
    return paged_json({"identifiers": entries}, next_token)


@router.post(
    "/namespaces/{namespace}/tables", response_model=TableResponse, summary="Create a table"
)
def create_table(
    store: StoreDep,
    vendor: VendorDep,
    signer: SignerDep,
    principal: PrincipalDep,
    namespace: WritableNamespace,
    body: CreateTableBody,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Create a table, or start a create transaction when ``stage-create`` is true.

    A created table's response carries an ``ETag``; a staged one has no metadata file yet,
    hence no ETag. Vended credentials or remote-signing config are added when the client
    asks for them.
    """
    response = store.create_table(namespace, body)
    identifier = (*namespace, body.name)
    delegated = _delegated(vendor, signer, principal, response, access_delegation, identifier)
    return _with_etag(delegated)


@router.post(
    "/namespaces/{namespace}/register",
    response_model=TableResponse,
    summary="Register a table from a metadata file",
)
def register_table(
    store: StoreDep,
    vendor: VendorDep,
    signer: SignerDep,
    principal: PrincipalDep,
    namespace: WritableNamespace,
    body: RegisterTableBody,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Register an existing metadata file under a table name."""
    response = store.register_table(namespace, body.name, body.metadata_location, body.overwrite)
    identifier = (*namespace, body.name)
    delegated = _delegated(vendor, signer, principal, response, access_delegation, identifier)
    return _with_etag(delegated)


@router.get(TABLE_PATH, response_model=TableResponse, summary="Load a table")
def load_table(
    store: StoreDep,
    vendor: VendorDep,
    signer: SignerDep,
    principal: PrincipalDep,
    namespace: ReadableNamespace,
    table: str,
    snapshots: Annotated[Literal["all", "refs"], Query()] = "all",
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Return the table's metadata location, metadata, client config (and credentials).

    The ETag comes from one primary-key lookup of the table's metadata location (and the
    ``snapshots`` mode); a matching ``If-None-Match`` is answered 304 before the metadata file
    is read. Otherwise the body comes from the server's LRU of serialized answers (keyed by
    metadata location and mode: metadata files are immutable). A client asking for vended
    credentials or remote signing gets neither a 304 nor a cached body: its answer is built
    for it.
    """
    identifier = (*namespace, table)
    location = store.metadata_location(identifier)
    etag = table_etag(location, snapshots)
    if vendor.applies(access_delegation) or signer.applies(access_delegation):
        response = store.table_response(location, snapshots)
        decorated = _delegated(vendor, signer, principal, response, access_delegation,
                               identifier)
        return _with_etag(decorated, snapshots)
    if matches_if_none_match(if_none_match, etag):
        return not_modified(etag)
    body = store.table_response_body(location, snapshots)
    return Response(body, media_type="application/json", headers={ETAG_HEADER: etag})


@router.head(TABLE_PATH, status_code=NO_CONTENT, summary="Check if a table exists")
def table_exists(store: StoreDep, namespace: ReadableNamespace, table: str) -> Response:
    """Answer 204 when the table exists, 404 otherwise."""
    exists = store.table_exists((*namespace, table))
    return Response(status_code=NO_CONTENT if exists else status.HTTP_404_NOT_FOUND)


@router.post(TABLE_PATH, response_model=CommitTableResponse, summary="Commit updates to a table")
def commit_table(
    store: StoreDep, namespace: WritableNamespace, table: str, body: UpdateTableBody
) -> Response:
    """Check the requirements and apply the updates atomically (409 when a requirement fails)."""
    identifier = (*namespace, table)
    change = TableChangeRequest(identifier, body.requirements, body.updates)
    return _with_etag(store.commit_table(change))


@router.delete(TABLE_PATH, status_code=NO_CONTENT, summary="Drop a table")
def drop_table(
    store: StoreDep,
    principal: PrincipalDep,
    namespace: WritableNamespace,
    table: str,
    purge_requested: Annotated[bool, Query(alias="purgeRequested")] = False,
) -> Response:
    """Drop a table; with ``purgeRequested`` (admin role) also delete its files."""
    if purge_requested:
        principal.require(namespace, Role.ADMIN, "purge table")
    store.drop_table((*namespace, table), purge=purge_requested)
    return Response(status_code=NO_CONTENT)


@router.post("/tables/rename", status_code=NO_CONTENT, summary="Rename a table")
def rename_table(store: StoreDep, principal: PrincipalDep, body: RenameTableBody) -> Response:
    """Rename a table, possibly moving it to another namespace (writer role on both)."""
    source = (*body.source.namespace.root, body.source.name)
    destination = (*body.destination.namespace.root, body.destination.name)
    for identifier in (source, destination):
        principal.require(identifier[:-1], Role.WRITER, "rename table")
    store.rename_table(source, destination)
    return Response(status_code=NO_CONTENT)


@router.post("/transactions/commit", status_code=NO_CONTENT, summary="Commit several tables")
def commit_transaction(
    store: StoreDep, principal: PrincipalDep, body: CommitTransactionBody
) -> Response:
    """Commit changes to several tables atomically: all of them or none (writer on each)."""
    changes = [
        TableChangeRequest(
            (*change.identifier.namespace.root, change.identifier.name),
            change.requirements,
            change.updates,
        )
        for change in body.table_changes
    ]
    for change in changes:
        principal.require(change.identifier[:-1], Role.WRITER, "commit transaction")
    store.commit_transaction(changes)
    return Response(status_code=NO_CONTENT)
