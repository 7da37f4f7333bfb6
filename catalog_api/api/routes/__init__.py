"""Routers of the Iceberg REST Catalog API, one module per resource."""
