"""Application factory of the Iceberg REST Catalog service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from catalog_api.api.main import api_router
from catalog_api.api.routes.config import API_PREFIX
from catalog_api.core.config import CatalogSettings
from catalog_api.credentials import CredentialVendor
from catalog_api.error_responses import install_error_handlers
from catalog_api.generic_tables import GenericTableStore
from catalog_api.idempotency import IdempotencyMiddleware, IdempotencyStore
from catalog_api.load_table_fastpath import LoadTableFastPath
from catalog_api.metrics_store import MetricsStore
from catalog_api.middleware import BodySizeLimitMiddleware
from catalog_api.prefix import PrefixMiddleware, route_prefix
from catalog_api.scan_plans import ScanPlanRegistry
from catalog_api.security import AuthenticationMiddleware, Authenticator
from catalog_api.signing import RemoteSigner
from catalog_api.store import CatalogStore
from catalog_api.view_store import ViewStore

DESCRIPTION = (
    "Apache Iceberg REST Catalog (spec 1.11) backed by a SQL database. "
    f"Clients use the base URI `http://host:port{API_PREFIX}`. Every `/v1/...` path below is "
    "also served as `/v1/{prefix}/...`, the prefix being the catalog's name, which "
    "`GET /v1/config?warehouse=<name>` returns as `overrides.prefix`."
)


def _add_middlewares(app: FastAPI, settings: CatalogSettings) -> None:
    """Wrap the app in its middlewares; the last added runs first.

    Innermost first: idempotency, body size, the loadTable fast path, authentication, and
    outermost the ``{prefix}`` mapping.
    """
    store: CatalogStore = app.state.store
    idempotency = IdempotencyStore(store.catalog.engine, settings.idempotency_key_lifetime)
    app.add_middleware(IdempotencyMiddleware, store=idempotency)
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(
        LoadTableFastPath,
        store=store,
        delegations=(app.state.credential_vendor, app.state.remote_signer),
        separator=settings.decoded_namespace_separator,
    )
    app.add_middleware(AuthenticationMiddleware, authenticator=app.state.authenticator)
    prefixes = frozenset({settings.catalog_name}) if route_prefix(settings.catalog_name) else None
    app.add_middleware(PrefixMiddleware, prefixes=prefixes or frozenset())


def create_app(settings: CatalogSettings, routers: Sequence[APIRouter] = ()) -> FastAPI:
    """Build the catalog application.

    The REST API is served under ``/iceberg/v1/...``, its OpenAPI page at ``/iceberg/docs``
    and a liveness probe at ``/healthz``. The catalog database tables are created if absent.

    Args:
        settings: Service settings.
        routers: More routes, served behind the same middlewares (authentication
            included) and error model: the pipeline's (``/lakehouse/v1``).

    Returns:
        The FastAPI application (``app.state.store`` holds its ``CatalogStore``,
        ``app.state.metrics`` its ``MetricsStore``). Keyed mutation requests go through
        ``IdempotencyMiddleware``; bodies are size-limited by ``BodySizeLimitMiddleware``;
        plain ``loadTable`` requests of readers are answered by ``LoadTableFastPath``
        before routing; ``AuthenticationMiddleware`` answers 401 to unauthenticated callers
        before all of them (``app.state.authenticator``); ``PrefixMiddleware`` (outermost)
        maps ``/v1/{catalog_name}/...`` onto ``/v1/...``.

    Raises:
        catalog_api.security.AuthSetupError: A client secret or the token key of
            ``settings.auth`` cannot be read.
        sqlalchemy.exc.ArgumentError: If ``settings.database_url`` is not a valid URL.
        sqlalchemy.exc.OperationalError: If the database cannot be reached.
    """
    authenticator = Authenticator(settings.auth, settings.catalog_name)
    store = CatalogStore(settings)
    scan_plans = ScanPlanRegistry(settings.planning)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        scan_plans.close()
        store.close()

    app = FastAPI(
        title="Lakehouse Iceberg REST Catalog",
        description=DESCRIPTION,
        version="0.1.0",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=f"{API_PREFIX}/redoc",
        swagger_ui_oauth2_redirect_url=f"{API_PREFIX}/docs/oauth2-redirect",
        openapi_url=f"{API_PREFIX}/openapi.json",
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.metrics = MetricsStore(store.catalog.engine, settings.catalog_name)
    app.state.views = ViewStore(store)
    app.state.generic_tables = GenericTableStore(store)
    app.state.settings = settings
    app.state.scan_plans = scan_plans
    app.state.credential_vendor = CredentialVendor(settings)
    app.state.remote_signer = RemoteSigner(settings)
    app.state.authenticator = authenticator
    install_error_handlers(app)
    _add_middlewares(app, settings)
    app.include_router(api_router, prefix=API_PREFIX)
    for router in routers:
        app.include_router(router)

    @app.get("/healthz", tags=["Health"], summary="Liveness probe")
    def healthz() -> dict[str, str]:
        """Answer 200 while the service is up."""
        return {"status": "ok"}

    return app
