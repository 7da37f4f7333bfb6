"""The router of the whole Iceberg REST API, mounted by the app under ``/iceberg``."""

from __future__ import annotations

from fastapi import APIRouter

from catalog_api.api.routes import (
    config,
    credentials,
    generic_tables,
    metrics,
    namespaces,
    oauth,
    planning,
    signing,
    tables,
    views,
)

api_router = APIRouter()
api_router.include_router(config.router)
api_router.include_router(oauth.router)
api_router.include_router(namespaces.router)
api_router.include_router(tables.router)
api_router.include_router(metrics.router)
api_router.include_router(views.router)
api_router.include_router(generic_tables.router)
api_router.include_router(planning.router)
api_router.include_router(credentials.router)
api_router.include_router(signing.router)
