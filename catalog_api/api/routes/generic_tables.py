"""Apache Polaris's Generic Table API: list, create, load, drop non-Iceberg tables.

Mounted beside the Iceberg API, under ``<catalog uri>/polaris/v1/...`` (so
``/iceberg/polaris/v1/namespaces/{namespace}/generic-tables``): Polaris clients build these
paths relative to the same catalog URI they use for Iceberg, and this service's ``{prefix}`` is
empty, as for the Iceberg routes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from pyiceberg.catalog.rest import ListTablesResponse

from catalog_api.api.routes.responses import json_response
from catalog_api.deps import ReadableNamespace, WritableNamespace
from catalog_api.generic_table_models import CreateGenericTableRequest, LoadGenericTableResponse
from catalog_api.generic_tables import GenericTableStore
from catalog_api.paging import PageDep, paged_json

router = APIRouter(prefix="/polaris/v1", tags=["Generic Table API"])

TABLES_PATH = "/namespaces/{namespace}/generic-tables"
TABLE_PATH = f"{TABLES_PATH}/{{generic_table}}"
NO_CONTENT = status.HTTP_204_NO_CONTENT

#: The endpoints as Polaris advertises them in ``GET /v1/config`` (``PolarisEndpoints``).
ADVERTISED_ENDPOINTS = (
    "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
    "DELETE polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
)


async def get_generic_tables(request: Request) -> GenericTableStore:
    """Return the application's ``GenericTableStore``."""
    tables: GenericTableStore = request.app.state.generic_tables
    return tables


GenericTablesDep = Annotated[GenericTableStore, Depends(get_generic_tables)]


def _loaded(table: object) -> Response:
    return json_response(LoadGenericTableResponse.model_validate({"table": table}))


@router.get(TABLES_PATH, response_model=ListTablesResponse, summary="List generic tables")
def list_generic_tables(
    tables: GenericTablesDep, namespace: ReadableNamespace, page: PageDep
) -> Response:
    """List the generic tables of a namespace; paginated when ``pageToken`` is sent."""
    identifiers, next_token = page.apply(tables.list_tables(namespace), key=lambda i: i[-1])
    entries = [{"namespace": list(ident[:-1]), "name": ident[-1]} for ident in identifiers]
    return paged_json({"identifiers": entries}, next_token)


@router.post(
    TABLES_PATH, response_model=LoadGenericTableResponse, summary="Create a generic table"
)
def create_generic_table(
    tables: GenericTablesDep, namespace: WritableNamespace, body: CreateGenericTableRequest
) -> Response:
    """Create a generic table and return it."""
    return _loaded(tables.create_table(namespace, body))


@router.get(TABLE_PATH, response_model=LoadGenericTableResponse, summary="Load a generic table")
def load_generic_table(
    tables: GenericTablesDep, namespace: ReadableNamespace, generic_table: str
) -> Response:
    """Return everything the generic table was created with."""
    return _loaded(tables.load_table((*namespace, generic_table)))


@router.delete(TABLE_PATH, status_code=NO_CONTENT, summary="Drop a generic table")
def drop_generic_table(
    tables: GenericTablesDep, namespace: WritableNamespace, generic_table: str
) -> Response:
    """Remove a generic table from the catalog (its files stay)."""
    tables.drop_table((*namespace, generic_table))
    return Response(status_code=NO_CONTENT)
