"""Iceberg REST Catalog service (FastAPI) backed by pyiceberg's ``SqlCatalog``.

Clients use the base URI ``http://host:port/iceberg``. This package imports no pyspark and
nothing from the other packages of the project.
"""

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
