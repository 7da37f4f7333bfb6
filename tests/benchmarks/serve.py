"""A server process for the catalog benchmark: the catalog app, or a trivial FastAPI app.

``python -m tests.benchmarks.serve catalog ROOT PORT`` serves the catalog (SQLite file and
``file://`` warehouse under ROOT) as ``lakehouse serve`` does: one uvicorn process, access
log off. ``catalog-auth`` serves it with authentication on: one client, ``bench``, an admin,
whose secret is the environment variable ``LAKEHOUSE_BENCH_SECRET``.
``python -m tests.benchmarks.serve trivial ROOT PORT`` serves ``GET /ping`` with the same
server settings: the ceiling of FastAPI + uvicorn on this machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI

BENCH_CLIENT = "bench"
SECRET_ENV = "LAKEHOUSE_BENCH_SECRET"


def trivial_app() -> FastAPI:
    """``GET /ping`` -> ``{"ok": true}``."""
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    return app


def main() -> None:
    kind, root, port = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    if kind in ("catalog", "catalog-auth"):
        from catalog_api import CatalogSettings
        from catalog_api.app import create_app
        from catalog_api.security import AuthSettings, ClientSettings, GrantSettings

        auth = AuthSettings()
        if kind == "catalog-auth":
            auth = AuthSettings(
                enabled=True, clients={BENCH_CLIENT: ClientSettings(secret_env=SECRET_ENV)},
                grants={BENCH_CLIENT: [GrantSettings(role="admin")]})  # type: ignore[list-item]
        (root / "warehouse").mkdir(parents=True, exist_ok=True)
        app = create_app(CatalogSettings(warehouse=(root / "warehouse").as_uri(),
                                         database_url=f"sqlite:///{root / 'catalog.db'}",
                                         auth=auth))
    else:
        app = trivial_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
