"""``GET /v1/config``: catalog configuration and the list of supported endpoints."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import TypeAdapter

from catalog_api.api.routes.generic_tables import ADVERTISED_ENDPOINTS as GENERIC_TABLE_ENDPOINTS
from catalog_api.core.config import API_PREFIX
from catalog_api.deps import StoreDep
from catalog_api.prefix import route_prefix
from catalog_api.spec_endpoints import ADVERTISABLE, find_operation

__all__ = ["API_PREFIX", "router", "supported_endpoints"]

router = APIRouter(tags=["Configuration API"])


_DURATION = TypeAdapter(timedelta)


def iso_duration(value: timedelta) -> str:
    """Format a duration as ISO 8601, e.g. ``PT30M``."""
    encoded: str = _DURATION.dump_python(value, mode="json")
    return encoded


def supported_endpoints(app: FastAPI) -> list[str]:
    """List the spec operations the application serves, as ``"METHOD /v1/{prefix}/..."``.

    Derived from the application's routes, those its OpenAPI document lists (without
    building that document: 0.8 s at a process's first request), so new routes are
    advertised automatically; routes that are not operations of the spec (extensions,
    ``/v1/config``, ``/v1/oauth/tokens``) are never listed.

    Args:
        app: The catalog application.

    Returns:
        The sorted endpoint strings (spec 1.11.0, ``CatalogConfig.endpoints``).
    """
    cached: list[str] | None = getattr(app.state, "endpoints", None)
    if cached is not None:
        return cached
    endpoints: set[str] = set()
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods or ():
            operation = find_operation(method.lower(),
                                       (route.path_format or "").removeprefix(API_PREFIX))
            if operation in ADVERTISABLE:
                endpoints.add(operation.endpoint)
    endpoints.update(GENERIC_TABLE_ENDPOINTS)
    app.state.endpoints = sorted(endpoints)
    return app.state.endpoints


@router.get("/v1/config", summary="List all catalog configuration settings")
def get_config(
    request: Request,
    store: StoreDep,
    warehouse: Annotated[str | None, Query(description="Warehouse requested by the client")] = None,
) -> dict[str, Any]:
    """Return defaults, overrides, the supported endpoints and the idempotency-key lifetime.

    ``overrides`` always holds ``warehouse`` and ``namespace-separator`` (URL-encoded).
    ``idempotency-key-lifetime`` is an ISO-8601 duration such as ``PT30M``. The service has
    one warehouse, named ``catalog_name``: a client asking for it by that name gets
    ``overrides.prefix`` and uses the ``/v1/{prefix}/...`` routes (see
    :mod:`catalog_api.prefix`). Any other ``warehouse`` (none, the warehouse URI Spark sends,
    the ATTACH name DuckDB sends) gets no prefix and the unprefixed routes, as before.
    Implements ``getConfig`` of spec 1.11.0.
    """
    settings = store.settings
    prefix = route_prefix(settings.catalog_name) if warehouse == settings.catalog_name else None
    return {
        "defaults": dict(settings.config_defaults),
        "overrides": {
            **settings.config_overrides,
            "warehouse": settings.warehouse,
            "namespace-separator": settings.namespace_separator,
            **({"prefix": prefix} if prefix else {}),
        },
        "endpoints": supported_endpoints(request.app),
        "idempotency-key-lifetime": iso_duration(settings.idempotency_key_lifetime),
    }
