"""The status page: ``GET /status`` on the catalog service, one HTML page for people.

For each view of the pipeline: its state and degraded reason, its lag over the last hour
against its target (a plot, drawn with matplotlib as inline SVG), its SLO compliance, its
last refreshes and its plan (laws and engine). Everything is read as the caller, like the
pipeline's other routes (:func:`lakehouse.routes.caller_client`): the catalog's
authentication applies.

The lag is rebuilt from the refresh history (:mod:`lakehouse.history`): each recorded
refresh read its sources at its start and committed at its end, so the lag is a sawtooth
between them (:class:`lakehouse.slo.FreshnessLog`). Skipped ticks are not recorded, so a
view whose sources did not change is drawn as aging, and counted late once past its
target: the page's compliance is a lower bound of the scheduler's own
(``lakehouse_view_slo_compliance``).
"""

from __future__ import annotations

import html
import io
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import anyio
import pyarrow as pa
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ForbiddenError as IcebergForbiddenError
from pyiceberg.exceptions import UnauthorizedError as IcebergUnauthorizedError

from catalog_api.errors import CatalogError, ForbiddenError, NotAuthorizedError
from lakehouse.api import Pipeline
from lakehouse.config import Config
from lakehouse.errors import HistoryError
from lakehouse.history import first_line
from lakehouse.routes import caller_client
from lakehouse.slo import SLO_WINDOW_S, FreshnessLog
from lakehouse.status import ViewStatus

__all__ = ["status_router"]

log = logging.getLogger(__name__)

T = TypeVar("T")
LAST_REFRESHES = 8
"""Refreshes listed per view."""
HISTORY_READ_S = 24 * 3600.0
"""How far back the page reads the history: the window, and the last refresh before it (a
view idle for longer shows from its first refresh in the window only)."""


def status_router(config: Config) -> APIRouter:
    """The ``/status`` page for the views of ``config``."""
    router = APIRouter(tags=["Pipeline"])
    threads = anyio.CapacityLimiter(2)  # this server's: bound to its event loop
    planner = _Planner(config)

    @router.get("/status", response_class=HTMLResponse, summary="The pipeline's status page")
    async def status_page(request: Request) -> HTMLResponse:
        """Each view's state, lag against target, SLO, last refreshes and plan."""
        catalog = await anyio.to_thread.run_sync(caller_client, config, request,
                                                 limiter=threads)
        try:
            page = await anyio.to_thread.run_sync(
                partial(render, config, catalog, planner.plan), limiter=threads)
        except (IcebergForbiddenError, HistoryError) as error:
            if isinstance(error, HistoryError) and not isinstance(
                    error.__cause__, IcebergForbiddenError):
                log.warning("status page: %s", error)  # the details stay in the service's log
                raise CatalogError("the refresh history cannot be read") from None
            raise ForbiddenError("the status page needs the reader role on every view and "
                                 "source of the pipeline, and on the history") from None
        except IcebergUnauthorizedError:
            raise NotAuthorizedError("the caller's token expired or was revoked") from None
        return HTMLResponse(page)

    return router


def render(config: Config, catalog: Catalog, plan: Callable[[str], str],
           now_s: float | None = None) -> str:
    """The page's HTML (a whole document).

    Args:
        config: The pipeline's configuration.
        catalog: A client acting as the caller.
        plan: A view's plan as text (:func:`ivm.explain`), given its name.
        now_s: The time the page shows (default: now).
    """
    now_s = time.time() if now_s is None else now_s
    pipeline = Pipeline(config, catalog)
    states = pipeline.status()
    since = datetime.fromtimestamp(now_s - HISTORY_READ_S, UTC)  # the window, and before it
    rows = (_recent(pipeline.history(None, None, since=since), now_s) if config.history_table
            else {})
    targets = {view.name: view.target_lag_s for view in config.views}
    sections = [_view_section(state, rows.get(state.view, []), targets[state.view], plan,
                              now_s) for state in states]
    figure = _lag_figure(states, rows, targets, now_s)
    return _PAGE.format(generated=html.escape(datetime.fromtimestamp(now_s).isoformat(
        " ", "seconds")), plot=figure, sections="\n".join(sections))


def _recent(history: pa.Table, now_s: float) -> dict[str, list[dict[str, Any]]]:
    """Each view's refreshes of the SLO window, and its last one before it, oldest first.

    Failed refreshes are kept (they are listed), but the lag is replayed from the others.
    """
    by_view: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(history.to_pylist(), key=lambda r: r["started_at"]):
        by_view.setdefault(row["view"], []).append(row)
    start_s = now_s - SLO_WINDOW_S
    recent = {}
    for view, rows in by_view.items():
        before = [r for r in rows if r["mode"] != "failed" and _ended_s(r) < start_s]
        recent[view] = [*before[-1:], *(r for r in rows if _ended_s(r) >= start_s)]
    return recent


def _ended_s(row: Mapping[str, Any]) -> float:
    return float(row["started_at"].timestamp() + row["duration_s"])


def _freshness(rows: Sequence[Mapping[str, Any]], view: str, now_s: float) -> FreshnessLog:
    """The lag's sawtooth rebuilt from ``rows`` (each refresh that committed)."""
    clock = _Clock()
    log = FreshnessLog(clock=clock)
    for row in rows:
        if row["mode"] != "failed":
            clock.now_s = _ended_s(row)
            log.fresh(view, row["started_at"].timestamp())
    clock.now_s = now_s
    return log


class _Clock:
    """A settable clock, to replay the history into a :class:`FreshnessLog`."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def _lag_points(rows: Sequence[Mapping[str, Any]], now_s: float) -> tuple[list[float], list[float]]:
    """The lag's sawtooth as (seconds since now, lag in seconds) points."""
    done = [r for r in rows if r["mode"] != "failed"]
    xs: list[float] = []
    ys: list[float] = []
    for row, following in zip(done, [*done[1:], None], strict=True):
        as_of = row["started_at"].timestamp()
        until = _ended_s(following) if following is not None else now_s
        xs += [_ended_s(row) - now_s, until - now_s]
        ys += [_ended_s(row) - as_of, until - as_of]
    return xs, ys


def _lag_figure(states: Sequence[ViewStatus], rows: Mapping[str, list[dict[str, Any]]],
                targets: Mapping[str, float | None], now_s: float) -> str:
    """One plot of every view's lag over the last hour, its target dashed; inline SVG.

    matplotlib is imported here, on the first page drawn: not by every process that
    serves the catalog.
    """
    from matplotlib.figure import Figure  # draws without a display (no pyplot)

    figure = Figure(figsize=(9, 3.2))
    axes = figure.subplots()
    for index, state in enumerate(states):
        color = f"C{index % 10}"
        xs, ys = _lag_points(rows.get(state.view, []), now_s)
        if xs:
            axes.plot([x / 60 for x in xs], ys, color=color, label=state.view)
        target = targets.get(state.view)
        if target is not None:
            axes.axhline(target, color=color, linestyle="--", linewidth=0.8)
    axes.set_xlim(-SLO_WINDOW_S / 60, 0)
    axes.set_xlabel("minutes ago")
    axes.set_ylabel("lag (s)")
    axes.set_title("Freshness lag over the last hour (dashed: targets)")
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    out = io.StringIO()
    figure.savefig(out, format="svg")
    text = out.getvalue()
    return text[text.index("<svg"):]


def _view_section(state: ViewStatus, rows: Sequence[Mapping[str, Any]],
                  target_s: float | None, plan: Callable[[str], str], now_s: float) -> str:
    compliance = (_freshness(rows, state.view, now_s).compliance(state.view, target_s)
                  if target_s is not None else None)
    slo = (f"{compliance:.1%} of the last hour within {html.escape(state.target_lag or '')}"
           if compliance is not None else "no target" if target_s is None else "no refresh yet")
    refreshes = "".join(
        f"<tr><td>{html.escape(r['started_at'].astimezone().strftime('%H:%M:%S'))}</td>"
        f"<td>{r['duration_s']:.2f}</td><td>{html.escape(str(r['mode']))}</td>"
        f"<td>{html.escape(str(r['engine'] or '-'))}</td><td>{r['rows_in'] or 0}</td>"
        f"<td>{r['rows_out'] or 0}</td>"
        f"<td>{html.escape(str(r['error'] or r['reason'] or ''))}</td></tr>"
        for r in reversed(rows[-LAST_REFRESHES:]))
    state_text = state.degraded or "ok"
    lag = "fresh" if state.lag_s == 0 else f"{state.lag_s:.0f} s" if state.lag_s else "-"
    return _SECTION.format(
        view=html.escape(state.view), state_class="ok" if state_text == "ok" else "late",
        state=html.escape(state_text), lag=lag, slo=slo, refreshes=refreshes,
        stopped=html.escape(state.stopped or ""), plan=html.escape(plan(state.view)))


class _Planner:
    """Compiles each view's plan once per service process, with the pipeline's credential.

    Its runtime never starts a catalog (it runs inside one) nor Spark; a plan is compiled
    on first request and kept (restart the service after a source's schema changes).
    """

    def __init__(self, config: Config):
        self.pipeline = Pipeline(config, read_only=True)
        self._lock = threading.Lock()  # page threads share the runtime and its plans

    def plan(self, view: str) -> str:
        """``view``'s plan as text, or why it has none (the error's first line)."""
        with self._lock:
            try:
                return self.pipeline.explain(view)
            except Exception as error:  # shown on the page in place of the plan
                return f"no plan: {first_line(error)}"


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lakehouse-freshness: status</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }}
h1 {{ font-size: 1.3rem; }} h2 {{ font-size: 1.05rem; margin-bottom: .3rem; }}
section {{ border-top: 1px solid #ddd; padding-top: .5rem; margin-top: 1rem; }}
table {{ border-collapse: collapse; font-size: .85rem; }}
td, th {{ padding: .1rem .6rem; text-align: left; border-bottom: 1px solid #eee; }}
.ok {{ color: #1a7f37; }} .late {{ color: #b35900; font-weight: bold; }}
pre {{ background: #f6f8fa; padding: .5rem; font-size: .8rem; overflow-x: auto; }}
</style></head>
<body><h1>lakehouse-freshness: status</h1><p>Generated {generated}.</p>
{plot}
{sections}
</body></html>
"""

_SECTION = """<section id="{view}"><h2>{view}: <span class="{state_class}">{state}</span></h2>
<p>Lag: {lag}. SLO: {slo}. {stopped}</p>
<table><tr><th>started</th><th>s</th><th>mode</th><th>engine</th><th>rows in</th>
<th>rows out</th><th>reason or error</th></tr>{refreshes}</table>
<details open><summary>plan</summary><pre>{plan}</pre></details></section>"""
