"""A prototype of the loadTable fast path, measured next to the real one (not product code).

The catalog's ``loadTable`` reads the table's row, reads and parses its metadata file and
serializes the response on every request, also when ``If-None-Match`` then answers 304.
This ASGI wrapper tries the fix: one indexed SQL lookup of ``metadata_location``; a 304 when
the ETag matches; otherwise the response body cached by metadata location (metadata files
are immutable), falling through to the real route on a miss. Plain single-part namespaces,
``snapshots=all`` and no credential vending only: enough to measure what the fix would buy.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from pyiceberg.catalog.sql import IcebergTables

from catalog_api.etags import table_etag

PATH = re.compile(r"^/iceberg/v1/namespaces/([A-Za-z0-9_]+)/tables/([A-Za-z0-9_]+)$")


class LoadTableFastPath:
    """ASGI middleware: ETag check and cached bodies before the real ``loadTable`` route."""

    def __init__(self, app: Any, store: Any):
        self.app = app
        self.engine = store.catalog.engine
        self.catalog_name = store.catalog.name
        self.bodies: dict[str, bytes] = {}

    def _location(self, namespace: str, table: str) -> str | None:
        columns = IcebergTables.__table__.c
        query = sa.select(columns.metadata_location).where(
            columns.catalog_name == self.catalog_name, columns.table_namespace == namespace,
            columns.table_name == table)
        with self.engine.connect() as connection:
            return connection.execute(query).scalar()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        match = PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope["method"] != "GET" or scope.get("query_string"):
            await self.app(scope, receive, send)
            return
        location = self._location(*match.groups())
        if location is None:
            await self.app(scope, receive, send)
            return
        etag = table_etag(location, "all")
        headers = dict(scope["headers"])
        if headers.get(b"if-none-match", b"").decode() == etag:
            await _send(send, 304, etag, b"")
        elif location in self.bodies:
            await _send(send, 200, etag, self.bodies[location])
        else:
            await self.app(scope, receive, self._capturing(send, location))

    def _capturing(self, send: Any, location: str) -> Any:
        parts: list[bytes] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body"):
                    self.bodies[location] = b"".join(parts)
            await send(message)

        return capture


async def _send(send: Any, status: int, etag: str, body: bytes) -> None:
    headers = [(b"etag", etag.encode())]
    if body:
        headers += [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
