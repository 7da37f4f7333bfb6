"""Iceberg REST Catalog service (FastAPI) backed by pyiceberg's ``SqlCatalog``.

Clients use the base URI ``http://host:port/iceberg``. This package imports no pyspark and
nothing from the other packages of the project.

The names below are imported when first used (PEP 562): a process that only reads the
settings (``catalog_api.core.config``, as the pipeline's config does) does not load the
web application, which takes most of a second.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from catalog_api.app import create_app
    from catalog_api.core.config import CatalogSettings
    from catalog_api.errors import CatalogError
    from catalog_api.server import RunningServer, serve, serve_in_thread

__all__ = [
    "CatalogError",
    "CatalogSettings",
    "RunningServer",
    "create_app",
    "serve",
    "serve_in_thread",
]

_MODULES = {"CatalogError": "catalog_api.errors", "CatalogSettings": "catalog_api.core.config",
            "RunningServer": "catalog_api.server", "create_app": "catalog_api.app",
            "serve": "catalog_api.server", "serve_in_thread": "catalog_api.server"}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module 'catalog_api' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)
