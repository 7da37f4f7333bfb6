"""``GET /v1/config``: catalog configuration and the list of supported endpoints."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request

from catalog_api.deps import StoreDep

router = APIRouter(tags=["Configuration API"])

API_PREFIX = "/iceberg"


def supported_endpoints(app: FastAPI) -> list[str]:
    """List the application's catalog operations as ``"METHOD /v1/{prefix}/..."`` strings.

    Derived from the application's OpenAPI paths, so new routes are advertised automatically.

    Args:
        app: The catalog application.

    Returns:
        The sorted endpoint strings, excluding ``/v1/config`` itself.
    """
    cached: list[str] | None = getattr(app.state, "endpoints", None)
    if cached is not None:
        return cached
    endpoints: set[str] = set()
    for path, operations in app.openapi().get("paths", {}).items():
        if not path.startswith(f"{API_PREFIX}/v1/") or path == f"{API_PREFIX}/v1/config":
            continue
        spec_path = path.removeprefix(API_PREFIX).replace("/v1/", "/v1/{prefix}/", 1)
        spec_path = spec_path.replace("{plan_id}", "{plan-id}")  # not a Python identifier
        endpoints.update(f"{method.upper()} {spec_path}" for method in operations)
    app.state.endpoints = sorted(endpoints)
    return app.state.endpoints


@router.get("/v1/config", summary="List all catalog configuration settings")
def get_config(
    request: Request,
    store: StoreDep,
    warehouse: Annotated[str | None, Query(description="Warehouse requested by the client")] = None,
) -> dict[str, Any]:
    """Return defaults, overrides and the supported endpoints.

    The ``warehouse`` the client names is accepted and ignored: the service has one warehouse.
    """
    return {
        "defaults": {},
        "overrides": {"warehouse": store.settings.warehouse},
        "endpoints": supported_endpoints(request.app),
    }
