"""``POST .../tables/{table}/sign``: S3 remote signing (spec 1.11.0 ``signRequest``)."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from catalog_api.deps import NamespaceDep, StoreDep
from catalog_api.models import RemoteSignBody
from catalog_api.signing import RemoteSigner

router = APIRouter(prefix="/v1", tags=["Catalog API"])


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
    store: StoreDep, signer: SignerDep, namespace: NamespaceDep, table: str, body: RemoteSignBody
) -> Response:
    """Sign an S3 request inside the table's location with the server's credentials.

    The answer is ``RemoteSignResult`` with ``Cache-Control: no-cache`` (a signature carries
    its time). 404 for an unknown table, 400 when the table is not on S3 or signing is off,
    403 for a request reaching outside the table.
    """
    signed = signer.sign(store.table_location((*namespace, table)), body)
    return Response(json.dumps(signed), media_type="application/json",
                    headers={"Cache-Control": "no-cache"})
