"""The pipeline's HTTP routes on the catalog service: follow a view, wait for a source snapshot.

Served under ``/lakehouse/v1`` by ``lakehouse serve`` and the embedded catalog, behind the
catalog's authentication and error model. Each request reads the catalog as its caller:
its bearer token is passed on to the service's own Iceberg REST API, so a caller follows
or waits on only the views its roles let it load (403 otherwise).

- ``GET /lakehouse/v1/views/{view}/changes?since=S``: Server-Sent Events (sse-starlette),
  one ``change`` event per snapshot of the view table after ``S`` (or the current content
  first, without ``S``), ``id`` the snapshot id, so a reconnecting ``EventSource`` resumes
  with ``Last-Event-ID``; ``data`` is JSON: ``snapshot_id``, ``frontier``,
  ``committed_at_ms`` and ``rows`` (the view's columns plus ``_weight``).
- ``GET /lakehouse/v1/views/{view}/wait?source=NAME&snapshot=S&timeout_s=60``: answers
  ``{"view", "snapshot_id"}`` once a snapshot of the view reflects ``S`` of ``NAME``
  (:mod:`lakehouse.wait`); 408 ``WaitTimeoutException`` naming why the view is late.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError as IcebergForbiddenError
from pyiceberg.exceptions import NoSuchTableError
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from catalog_api.errors import BadRequestError, CatalogError, ForbiddenError, NotFoundError
from lakehouse.api import Pipeline
from lakehouse.catalog_client import TOKEN_PATH, storage_properties
from lakehouse.config import Config
from lakehouse.errors import (
    ConfigError,
    LakehouseError,
    SourceError,
    SubscriptionError,
    WaitTimeoutError,
)
from lakehouse.subscriptions import POLL_S, Subscription, ViewChange

__all__ = ["PREFIX", "views_router"]

PREFIX = "/lakehouse/v1"
MAX_WAIT_S = 600.0
"""Longest ``timeout_s`` a wait may ask for (each waiting request holds a worker thread)."""


class WaitTimeout(CatalogError):
    """No snapshot of the view reflected the source snapshot in time (408)."""

    code = 408
    error_type = "WaitTimeoutException"


def views_router(config: Config) -> APIRouter:
    """The pipeline's routes for the views of ``config``."""
    router = APIRouter(prefix=f"{PREFIX}/views/{{view}}", tags=["Pipeline"])

    @router.get("/changes", summary="Follow a view: each snapshot as a Z-set (SSE)")
    async def changes(request: Request, view: str, since: int | None = None,
                      last_event_id: Annotated[int | None, Header()] = None,
                      ) -> EventSourceResponse:
        """Stream each snapshot of the view after ``since`` (or ``Last-Event-ID``)."""
        catalog = await run_in_threadpool(_caller_catalog, config, request, view)
        subscription = Subscription(catalog, view, last_event_id or since)
        first = await run_in_threadpool(_guarded, subscription.next_change, view)
        return EventSourceResponse(_events(request, subscription, first), ping=15)

    @router.get("/wait", summary="Wait until a view reflects a source snapshot")
    def wait(request: Request, view: str, source: str, snapshot: int,
             timeout_s: Annotated[float, Query(gt=0, le=MAX_WAIT_S)] = 60.0,
             ) -> dict[str, Any]:
        """The view's first snapshot reflecting ``snapshot`` of ``source``."""
        pipeline = Pipeline(config, _caller_catalog(config, request, view))
        try:
            return {"view": view,
                    "snapshot_id": pipeline.wait(view, source, snapshot, timeout_s)}
        except WaitTimeoutError as error:
            raise WaitTimeout(str(error)) from None
        except (ConfigError, SourceError) as error:
            raise BadRequestError(str(error)) from None

    return router


async def _events(request: Request, subscription: Subscription,
                  first: ViewChange | None) -> AsyncIterator[dict[str, str]]:
    """The subscription's changes as SSE events, polling until the client disconnects."""
    change = first
    while not await request.is_disconnected():
        if change is None:
            await asyncio.sleep(POLL_S)
        else:
            yield {"event": "change", "id": str(change.snapshot_id), "data": _payload(change)}
        change = await run_in_threadpool(_guarded, subscription.next_change,
                                         subscription.view)


def _payload(change: ViewChange) -> str:
    return json.dumps({"snapshot_id": change.snapshot_id, "frontier": change.frontier,
                       "committed_at_ms": change.committed_at_ms,
                       "rows": change.rows.to_pylist()}, default=str)


def _guarded(next_change: Any, view: str) -> ViewChange | None:
    """``next_change()``, its errors in the catalog's error model."""
    try:
        change: ViewChange | None = next_change()
        return change
    except SubscriptionError as error:
        raise BadRequestError(str(error)) from None
    except IcebergForbiddenError:
        raise ForbiddenError(f"the caller may not read view {view!r}") from None


def _caller_catalog(config: Config, request: Request, view: str) -> Catalog:
    """A client of this service's own REST API, with the caller's token.

    Blocking (it calls the service): run it in a thread, never on the event loop. Checks
    that ``view`` is one of the pipeline's, and that the caller may load its table.

    Raises:
        NotFoundError: The pipeline has no such view, or it has no table yet.
        ForbiddenError: The caller may not load it.
    """
    try:
        config.view(view)
    except LakehouseError:
        raise NotFoundError(f"the pipeline has no view {view!r}") from None
    header = request.headers.get("authorization", "")
    token = header[7:] if header.lower().startswith("bearer ") else None
    base = str(request.base_url).rstrip("/")
    uri = f"{base}/iceberg"
    caller = {"token": token, "oauth2-server-uri": f"{uri}{TOKEN_PATH}"} if token else {}
    catalog = RestCatalog("caller", uri=uri, **caller, **storage_properties(config))
    try:
        catalog.load_table(view)
    except NoSuchTableError:
        raise NotFoundError(f"view {view!r} has no table yet (it is built by its first "
                            "refresh)") from None
    except IcebergForbiddenError:
        raise ForbiddenError(f"the caller may not read view {view!r}") from None
    return catalog
