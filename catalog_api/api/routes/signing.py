"""``POST .../tables/{table}/sign``: S3 remote signing (spec 1.11.0 ``signRequest``)."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from catalog_api.deps import PrincipalDep, ReadableNamespace, StoreDep
from catalog_api.models import RemoteSignBody
from catalog_api.security import Role
from catalog_api.signing import RemoteSigner

router = APIRouter(prefix="/v1", tags=["Catalog API"])

#: S3 request methods that only read; any other needs the writer role.
READ_METHODS = frozenset({"GET", "HEAD"})


async def get_signer(request: Request) -> RemoteSigner:
    """Return the application's remote signer."""
    signer: RemoteSigner = request.app.state.remote_signer
    return signer


SignerDep = Annotated[RemoteSigner, Depends(get_signer)]


@router.post(
    "/namespaces/{namespace}/tables/{table}/sign",
    summary="Remotely signs requests to object storage",
    responses={200: {"description": "RemoteSignResult: the URI and the headers to send"}},
)
def sign_request(
    store: StoreDep,
    signer: SignerDep,
    principal: PrincipalDep,
    namespace: ReadableNamespace,
    table: str,
    body: RemoteSignBody,
) -> Response:
    """Sign an S3 request inside the table's location with the server's credentials.

    The answer is ``RemoteSignResult`` with ``Cache-Control: no-cache`` (a signature carries
    its time). 404 for an unknown table, 400 when the table is not on S3 or signing is off,
    403 for a request reaching outside the table, or for one that is not a read
    (``GET``/``HEAD``) when the caller lacks the writer role on the namespace.
    """
    if body.method.upper() not in READ_METHODS:
        principal.require(namespace, Role.WRITER, f"have {body.method} requests signed")
    signed = signer.sign(store.table_location((*namespace, table)), body)
    return Response(json.dumps(signed), media_type="application/json",
                    headers={"Cache-Control": "no-cache"})
