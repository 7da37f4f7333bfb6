"""The ``loadTable`` fast path: plain ``GET .../tables/{table}`` answered before FastAPI routing.

Clients poll ``loadTable`` (the scheduler's ``on_change`` poll, DuckDB and Spark before every
query), so it is the hottest operation of the catalog. Routing through FastAPI (about 50
routes, dependency injection, the idempotency and body-size middlewares) costs more than the
answer itself once the answer is cached. This ASGI middleware serves the common request —
no vended credentials, ``snapshots`` at most, a caller with the reader role on the namespace
(``AuthenticationMiddleware`` identified it before) — from the same store functions the route
uses:

1. one primary-key lookup of the table's ``metadata_location``
   (:meth:`CatalogStore.metadata_location`);
2. the ETag of that location and ``snapshots`` mode (:func:`catalog_api.etags.table_etag`):
   304 when ``If-None-Match`` names it, before any metadata file is read;
3. otherwise the serialized answer from the store's LRU of bodies
   (:meth:`CatalogStore.table_response_body`).

Anything else falls through to the route (``routes/tables.py`` ``load_table``), which
answers with the same ETags and bodies: other query parameters, an invalid ``snapshots``,
``X-Iceberg-Access-Delegation`` asking for credentials or remote signing (answers built per
request), a caller without the reader role (the route answers 403), a missing table
(the route sends the ``ErrorModel``), or any error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import parse_qsl

import anyio.to_thread
from pyiceberg.typedef import Identifier
from starlette.types import ASGIApp, Receive, Scope, Send

from catalog_api.core.config import API_PREFIX
from catalog_api.credentials import ACCESS_DELEGATION_HEADER
from catalog_api.deps import split_namespace
from catalog_api.etags import matches_if_none_match, table_etag
from catalog_api.security import PRINCIPAL, Principal, Role
from catalog_api.store import CatalogStore, SnapshotMode

logger = logging.getLogger(__name__)

_PATH = re.compile(rf"^{re.escape(API_PREFIX)}/v1/namespaces/([^/]+)/tables/([^/]+)$")
_SNAPSHOT_MODES = ("all", "refs")
#: Query parameters that do not change the answer (``referenced-by`` only matters for
#: access control, which this catalog does not do).
_NEUTRAL_PARAMETERS = {"referenced-by"}
_IF_NONE_MATCH = b"if-none-match"
_DELEGATION = ACCESS_DELEGATION_HEADER.lower().encode()

#: (status, ETag, body) of a fast answer.
Answer = tuple[int, str, bytes]


class Delegation(Protocol):
    """An access delegation mechanism (credential vendor, remote signer)."""

    def applies(self, access_delegation: str | None) -> bool:
        """Whether a request with this header gets content built for it alone."""


class LoadTableFastPath:
    """ASGI middleware: ``loadTable`` from one SQL lookup, a 304 or a cached body.

    Args:
        app: The wrapped application (the catalog's FastAPI app and its middlewares).
        store: The catalog store (lookups, ETags' locations, body cache).
        delegations: The credential vendor and the remote signer: requests one of them
            applies to are left to the route.
        separator: The decoded namespace separator (``CatalogSettings``).
    """

    def __init__(
        self, app: ASGIApp, store: CatalogStore, delegations: Sequence[Delegation], separator: str
    ) -> None:
        self.app = app
        self.store = store
        self.delegations = tuple(delegations)
        self.separator = separator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a plain ``loadTable`` here, pass every other request on."""
        request = self._parse(scope)
        answer = None if request is None else await anyio.to_thread.run_sync(self._answer, *request)
        if answer is None:
            await self.app(scope, receive, send)
            return
        status, etag, body = answer
        headers = [(b"etag", etag.encode())]
        if status == 200:
            headers += [(b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _parse(self, scope: Scope) -> tuple[Identifier, SnapshotMode, str | None] | None:
        if scope["type"] != "http" or scope["method"] != "GET":
            return None
        match = _PATH.match(scope["path"])
        if match is None:
            return None
        snapshots: SnapshotMode = "all"
        for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
            if key == "snapshots" and value in _SNAPSHOT_MODES:
                snapshots = "refs" if value == "refs" else "all"
            elif key not in _NEUTRAL_PARAMETERS:
                return None  # the route validates (400) or knows the parameter
        headers = dict(scope["headers"])
        delegation = headers.get(_DELEGATION, b"").decode("latin-1") or None
        if any(mechanism.applies(delegation) for mechanism in self.delegations):
            return None
        identifier = (*split_namespace(match.group(1), self.separator), match.group(2))
        principal: Principal | None = scope.get("state", {}).get(PRINCIPAL)
        if principal is None or not principal.can(identifier[:-1], Role.READER):
            return None
        if_none_match = headers.get(_IF_NONE_MATCH)
        return identifier, snapshots, if_none_match.decode("latin-1") if if_none_match else None

    def _answer(
        self, identifier: Identifier, snapshots: SnapshotMode, if_none_match: str | None
    ) -> Answer | None:
        try:
            location = self.store.metadata_location(identifier)
            etag = table_etag(location, snapshots)
            if matches_if_none_match(if_none_match, etag):
                return 304, etag, b""
            return 200, etag, self.store.table_response_body(location, snapshots)
        except Exception:  # the route answers: 404 ErrorModel, or the error, logged there
            logger.debug("loadTable fast path fell through for %s", identifier, exc_info=True)
            return None
