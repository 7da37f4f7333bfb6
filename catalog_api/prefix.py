"""The spec's ``/v1/{prefix}/...`` routes, served beside the unprefixed ones.

Spec 1.11.0 writes every catalog path as ``/v1/{prefix}/...``; a client inserts the
``prefix`` that ``GET /v1/config`` returns in ``overrides`` (none: ``/v1/...``). This catalog
has one warehouse, named by ``CatalogSettings.catalog_name``: asking ``GET
/v1/config?warehouse=<catalog_name>`` returns ``overrides.prefix = <catalog_name>`` (see
``routes/config.py``), and this ASGI middleware maps ``/iceberg/v1/<catalog_name>/x`` (and
Polaris' ``/iceberg/polaris/v1/<catalog_name>/x``) onto ``/iceberg/v1/x`` before anything
else sees the request. Every route, middleware and error handler therefore serves both
forms alike.

A path is prefixed when its first segment after ``v1/`` is not one the spec's paths start
with (``namespaces``, ``tables``, ``config``, ...) and its second one is; an unknown prefix
there is a 404 ``NoSuchWarehouseException`` (the spec's error for an unknown warehouse).
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.types import ASGIApp, Receive, Scope, Send

from catalog_api.core.config import API_PREFIX
from catalog_api.error_responses import error_response

#: First segments (after the prefix) of the operations the spec puts under ``{prefix}``.
PREFIXED_SEGMENTS = frozenset({"namespaces", "tables", "transactions", "views"})
#: First path segments (after ``v1/``) of the spec's operations and of this server's routes.
UNPREFIXED_SEGMENTS = PREFIXED_SEGMENTS | {"config", "oauth"}
_BASES = (f"{API_PREFIX}/v1/", f"{API_PREFIX}/polaris/v1/")


def route_prefix(catalog_name: str) -> str | None:
    """The ``{prefix}`` of a catalog's routes, URL-encoded, or None when it cannot be one.

    Args:
        catalog_name: ``CatalogSettings.catalog_name``.

    Returns:
        The encoded path segment; None for an empty name or one that is a segment the spec's
        paths start with (``/v1/namespaces/...`` would become ambiguous).
    """
    if not catalog_name or catalog_name in UNPREFIXED_SEGMENTS:
        return None
    return quote(catalog_name, safe="")


class PrefixMiddleware:
    """Strip a known ``{prefix}`` segment from request paths; 404 for an unknown one.

    Args:
        app: The wrapped application.
        prefixes: Decoded prefixes served (the catalog name), possibly empty.
    """

    def __init__(self, app: ASGIApp, prefixes: frozenset[str]) -> None:
        self.app = app
        self.prefixes = prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Rewrite a prefixed path (``path`` and ``raw_path``) and call the application."""
        if scope["type"] == "http":
            split = _split(scope["path"])
            if split is not None:
                base, prefix, rest = split
                if prefix not in self.prefixes:
                    message = f"Warehouse (path prefix) {prefix!r} does not exist"
                    response = error_response(404, "NoSuchWarehouseException", message)
                    await response(scope, receive, send)
                    return
                scope = _rewritten(scope, base, rest)
        await self.app(scope, receive, send)


def _split(path: str) -> tuple[str, str, str] | None:
    """``(base, prefix, rest)`` of a prefixed path, None for any other path."""
    for base in _BASES:
        if path.startswith(base):
            prefix, _, rest = path[len(base) :].partition("/")
            if prefix in UNPREFIXED_SEGMENTS or rest.partition("/")[0] not in PREFIXED_SEGMENTS:
                return None
            return base, prefix, rest
    return None


def _rewritten(scope: Scope, base: str, rest: str) -> Scope:
    """A copy of ``scope`` without the prefix segment in ``path`` and ``raw_path``."""
    rewritten = {**scope, "path": base + rest}
    raw: bytes | None = scope.get("raw_path")
    if raw is not None and raw.startswith(base.encode()):
        rewritten["raw_path"] = base.encode() + raw[len(base) :].partition(b"/")[2]
    else:
        rewritten.pop("raw_path", None)
    return rewritten
