"""HTTP layer of the catalog service: routers only, no catalog logic."""
