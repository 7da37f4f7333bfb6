"""The pipeline's HTTP routes on the catalog service: follow a view, wait for a source snapshot.

Served under ``/lakehouse/v1`` by ``lakehouse serve`` and the embedded catalog, behind the
catalog's authentication and error model. Each request reads the catalog as its caller:
its bearer token is passed on to the service's own Iceberg REST API, so a caller follows
or waits on only the views its roles let it load (403 otherwise).

- ``GET /lakehouse/v1/views/{view}/changes?since=S&name=N``: Server-Sent Events
  (sse-starlette), one ``change`` event per snapshot of the view table after ``S`` (or the
  current content first, without ``S``), ``id`` the snapshot id, so a reconnecting
  ``EventSource`` resumes with ``Last-Event-ID``; ``data`` is JSON: ``snapshot_id``,
  ``frontier``, ``committed_at_ms`` and ``rows`` (the view's columns plus ``_weight``).
  With ``name`` (``[A-Za-z0-9_-]{1,64}``), a durable subscriber: its position (``S`` or
  ``Last-Event-ID`` when given, then each change sent once the next is due) is kept in the
  history table's namespace, written as the caller (the writer role on that namespace),
  and without either it resumes from there (:mod:`lakehouse.subscriptions`).
- ``GET /lakehouse/v1/views/{view}/wait?source=NAME&snapshot=S&timeout_s=60``: answers
  ``{"view", "snapshot_id"}`` once a snapshot of the view reflects ``S`` of ``NAME``
  (:mod:`lakehouse.wait`); 408 ``WaitTimeoutException`` naming why the view is late.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Header, Query, Request
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError as IcebergForbiddenError
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.exceptions import UnauthorizedError as IcebergUnauthorizedError
from sse_starlette import EventSourceResponse

from catalog_api.errors import (
    BadRequestError,
    CatalogError,
    ForbiddenError,
    NotAuthorizedError,
    NotFoundError,
)
from lakehouse.api import Pipeline
from lakehouse.catalog_client import TOKEN_PATH, storage_properties
from lakehouse.config import Config
from lakehouse.errors import (
    ConfigError,
    HistoryError,
    LakehouseError,
    SourceError,
    SubscriptionError,
)
from lakehouse.history import RefreshHistory
from lakehouse.subscriptions import POLL_S, SUBSCRIBER_NAME, Subscription, ViewChange
from lakehouse.wait import POLL_S as WAIT_POLL_S
from lakehouse.wait import first_reflecting

__all__ = ["PREFIX", "caller_client", "views_router"]

PREFIX = "/lakehouse/v1"
MAX_WAIT_S = 600.0
"""Longest ``timeout_s`` a wait may ask for."""
NAME_PATTERN = f"^{SUBSCRIBER_NAME.pattern}$"
"""A named subscriber's ``name`` (anything else: 400)."""
ROUTE_THREADS = 8
"""Worker threads these routes' catalog reads share (apart from the service's own)."""
T = TypeVar("T")


class WaitTimeout(CatalogError):
    """No snapshot of the view reflected the source snapshot in time (408)."""

    code = 408
    error_type = "WaitTimeoutException"


def views_router(config: Config) -> APIRouter:
    """The pipeline's routes for the views of ``config``."""
    router = APIRouter(prefix=f"{PREFIX}/views/{{view}}", tags=["Pipeline"])
    threads = anyio.CapacityLimiter(ROUTE_THREADS)  # this server's: bound to its event loop

    @router.get("/changes", summary="Follow a view: each snapshot as a Z-set (SSE)")
    async def changes(request: Request, view: str, since: int | None = None,
                      name: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
                      last_event_id: Annotated[int | None, Header()] = None,
                      ) -> EventSourceResponse:
        """Stream each snapshot of the view after ``since`` (or ``Last-Event-ID``).

        A ``name``d subscriber without either resumes after its acknowledged position;
        each change sent is acknowledged once the next one is due.
        """
        catalog = await _in_thread(threads, _caller_catalog, config, request, view)
        subscription = await _in_thread(threads, _guarded, partial(
            _opened, config, catalog, view, last_event_id or since, name), view)
        first = await _in_thread(threads, _guarded, subscription.next_change, view)
        return EventSourceResponse(_events(request, subscription, first, threads), ping=15)

    @router.get("/wait", summary="Wait until a view reflects a source snapshot")
    async def wait(request: Request, view: str, source: str, snapshot: int,
                   timeout_s: Annotated[float, Query(gt=0, le=MAX_WAIT_S)] = 60.0,
                   ) -> dict[str, Any]:
        """The view's first snapshot reflecting ``snapshot`` of ``source``."""
        catalog = await _in_thread(threads, _caller_catalog, config, request, view)
        pipeline = Pipeline(config, catalog)
        wanted = await _in_thread(threads, _checked, pipeline.wait_request, view, source,
                                  snapshot)
        deadline = time.monotonic() + timeout_s
        while not await request.is_disconnected():
            found = await _in_thread(threads, _checked, first_reflecting, config, catalog,
                                     wanted)
            if found is not None:
                return {"view": view, "snapshot_id": found}
            if time.monotonic() >= deadline:
                reason = await _in_thread(threads, pipeline.late_reason_or_unknown, view)
                raise WaitTimeout(f"view {view!r}: no snapshot reflects {source} at "
                                  f"{snapshot} after {timeout_s:g} s: {reason}")
            await asyncio.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
        raise CatalogError("the client went away")  # nobody reads this answer

    return router


async def _in_thread(threads: anyio.CapacityLimiter, function: Callable[..., T],
                     *args: Any) -> T:
    """``function(*args)`` in a worker thread of these routes' own pool.

    The calls read the catalog through this same service, whose synchronous routes take
    threads from the default pool: a separate, smaller pool keeps many waiting clients
    from taking every thread those inner calls need.
    """
    return await anyio.to_thread.run_sync(partial(function, *args), limiter=threads)


def _checked(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, the pipeline's errors in the catalog's error model."""
    try:
        return function(*args)
    except (ConfigError, SourceError) as error:
        raise BadRequestError(str(error)) from None
    except IcebergForbiddenError:
        raise ForbiddenError("the caller may not read a table this needs") from None
    except IcebergUnauthorizedError:
        raise NotAuthorizedError("the caller's token expired or was revoked") from None


async def _events(request: Request, subscription: Subscription, first: ViewChange | None,
                  threads: anyio.CapacityLimiter) -> AsyncIterator[dict[str, str]]:
    """The subscription's changes as SSE events, polling until the client disconnects.

    A failure once the stream has started (a token that expired, a table dropped) ends it
    with an ``error`` event carrying the catalog's error model.
    """
    change = first
    while not await request.is_disconnected():
        if change is None:
            await asyncio.sleep(POLL_S)
        else:
            yield {"event": "change", "id": str(change.snapshot_id), "data": _payload(change)}
        try:
            if change is not None:  # sent: the subscriber moved past it
                await _in_thread(threads, _guarded, partial(
                    subscription.acknowledge, change.snapshot_id), subscription.view)
            change = await _in_thread(threads, _guarded, subscription.next_change,
                                      subscription.view)
        except CatalogError as error:
            yield {"event": "error", "data": json.dumps({"error": {
                "message": str(error), "type": error.error_type, "code": error.code}})}
            return


def _payload(change: ViewChange) -> str:
    return json.dumps({"snapshot_id": change.snapshot_id, "frontier": change.frontier,
                       "committed_at_ms": change.committed_at_ms,
                       "rows": change.rows.to_pylist()}, default=str)


def _opened(config: Config, catalog: Catalog, view: str, since: int | None,
            name: str | None) -> Subscription:
    """The subscription of a request; a named one keeps its position in the history.

    Blocking (a named subscriber's position is read, or ``since`` recorded): run it in a
    thread.

    Raises:
        SubscriptionError: ``name`` is given and the pipeline keeps no history.
        lakehouse.errors.HistoryError: The position cannot be read or recorded.
    """
    positions = None
    if name is not None:
        if config.history_table is None:
            raise SubscriptionError("a named subscriber's position is kept in the history "
                                    "table's namespace, and history_table is null", view=view)
        positions = RefreshHistory(catalog, config.history_table)
    return Subscription(catalog, view, since, name=name, positions=positions)


def _guarded(call: Callable[[], T], view: str) -> T:
    """``call()`` (a subscription's step), its errors in the catalog's error model."""
    try:
        return call()
    except (SubscriptionError, SourceError) as error:
        raise BadRequestError(str(error)) from None
    except HistoryError as error:  # a named subscriber's position
        if isinstance(error.__cause__, IcebergForbiddenError):
            raise ForbiddenError("a named subscriber needs the writer role on the history "
                                 "table's namespace") from None
        if isinstance(error.__cause__, IcebergUnauthorizedError):
            raise NotAuthorizedError("the caller's token expired or was revoked") from None
        raise CatalogError(f"the position of a subscriber of view {view!r} cannot be read "
                           "or recorded") from error
    except IcebergForbiddenError:
        raise ForbiddenError(f"the caller may not read view {view!r}") from None
    except IcebergUnauthorizedError:
        raise NotAuthorizedError("the caller's token expired or was revoked") from None
    except NoSuchTableError:
        raise NotFoundError(f"view {view!r} has no table any more") from None
    except Exception as error:  # logged by the caller's error event; no trace to the client
        raise CatalogError(f"reading view {view!r} failed: {type(error).__name__}") from error


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
    catalog = caller_client(config, request)
    try:
        catalog.load_table(view)
    except NoSuchTableError:
        raise NotFoundError(f"view {view!r} has no table yet (it is built by its first "
                            "refresh)") from None
    except IcebergForbiddenError:
        raise ForbiddenError(f"the caller may not read view {view!r}") from None
    return catalog


def caller_client(config: Config, request: Request) -> RestCatalog:
    """A client of this service's own REST API that acts as the caller (its bearer token).

    It calls the address of the socket the request came in on, never the client's
    ``Host``. Blocking to build (it reads the service's config): run it in a thread.
    """
    header = request.headers.get("authorization", "")
    token = header[7:] if header.lower().startswith("bearer ") else None
    uri = f"{_own_base_url(request)}/iceberg"
    caller = {"token": token, "oauth2-server-uri": f"{uri}{TOKEN_PATH}"} if token else {}
    return RestCatalog("caller", uri=uri, **caller, **storage_properties(config))


def _own_base_url(request: Request) -> str:
    """This service's address: the local end of the connection the request came in on."""
    server = request.scope.get("server")
    if not server:
        raise CatalogError("the service's own address is unknown")
    host, port = server
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
