"""``GET .../tables/{table}/credentials``: vended storage credentials of a table."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pyiceberg.catalog.rest import LoadCredentialsResponse

from catalog_api.api.routes.responses import json_response
from catalog_api.credentials import CredentialVendor
from catalog_api.deps import PrincipalDep, ReadableNamespace, StoreDep
from catalog_api.security import Role

router = APIRouter(prefix="/v1", tags=["Catalog API"])


async def get_vendor(request: Request) -> CredentialVendor:
    """Return the application's credential vendor."""
    vendor: CredentialVendor = request.app.state.credential_vendor
    return vendor


VendorDep = Annotated[CredentialVendor, Depends(get_vendor)]


@router.get(
    "/namespaces/{namespace}/tables/{table}/credentials",
    response_model=LoadCredentialsResponse,
    summary="Load vended credentials for a table",
)
def load_credentials(
    store: StoreDep,
    vendor: VendorDep,
    principal: PrincipalDep,
    namespace: ReadableNamespace,
    table: str,
    plan_id: Annotated[str | None, Query(alias="planId")] = None,
) -> Response:
    """Return temporary credentials for the table's location (none off S3).

    They only read, unless the caller holds the writer role on the namespace. ``planId`` is
    accepted: credentials cover the whole table location, so they serve every plan of the
    table.
    """
    location = store.table_location((*namespace, table))
    writable = principal.can(namespace, Role.WRITER)
    credentials = vendor.storage_credentials(location, writable)
    answer = LoadCredentialsResponse.model_validate({"storage-credentials": credentials})
    return json_response(answer)
