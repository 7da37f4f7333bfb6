"""The status page (``/status``) on a real catalog server, rendered by headless Chromium.

The source and the view are Iceberg tables written with pyiceberg, the view's snapshot
carrying a frontier as a refresh's does, and the history holds refreshes of the last hour:
no Spark. Chromium (Debian's ``chromium``, installed by ``scripts/install-system-deps.sh``)
loads the page and takes the screenshot; ``LAKEHOUSE_UPDATE_DOCS=1`` copies it to
``docs/status-page.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from catalog_api import RunningServer, serve_in_thread
from ivm.laws import Law
from lakehouse.config import Config, parse_config
from lakehouse.history import HistoryRow, RefreshHistory
from lakehouse.refresh import RefreshResult
from lakehouse.served import pipeline_routers
from sinks.frontier import FRONTIER_KEY
from tests.conftest_catalog import CatalogServerHandle

DOCS = Path(__file__).parents[2] / "docs"
SQL = "SELECT carrier, COUNT(*) AS n FROM flights GROUP BY carrier"


@pytest.fixture
def pipeline(catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
             catalog_namespace: str) -> Config:
    """A source and two views built at its snapshot, with their recorded refreshes.

    ``busy``: refreshed 70 (before the hour), 30 and 3 minutes ago, a failure 40 minutes
    ago in between. ``idle``: last refreshed 90 minutes ago.
    """
    flights = rest_catalog.create_table(f"{catalog_namespace}.flights",
                                        pa.schema([pa.field("carrier", pa.string())]))
    flights.append(pa.table({"carrier": ["AA", "UA", "AA"]}))
    frontier = {"flights": flights.refresh().current_snapshot().snapshot_id}
    names = [f"{catalog_namespace}.busy", f"{catalog_namespace}.idle"]
    for name in names:
        view = rest_catalog.create_table(name, pa.schema(
            [pa.field("carrier", pa.string()), pa.field("n", pa.int64())]))
        view.append(pa.table({"carrier": ["AA", "UA"], "n": pa.array([2, 1], pa.int64())}),
                    snapshot_properties={FRONTIER_KEY: json.dumps(frontier)})
    config = parse_config({
        "warehouse": str(catalog_server.warehouse), "history_table": f"h_{catalog_namespace}.r",
        "catalog": {"embedded": False, "uri": catalog_server.uri},
        "sources": {"flights": {"iceberg": f"{catalog_namespace}.flights"}},
        "views": [{"name": name, "sql": SQL, "target_lag": "5m"} for name in names]})
    now = datetime.now(UTC)
    rows = [_refresh(names[0], now - timedelta(minutes=m), frontier) for m in (70, 30, 3)]
    rows.insert(1, HistoryRow.failed(names[0], now - timedelta(minutes=40), 0.4, frontier,
                                     RuntimeError("source 'flights': gone")))
    rows.append(_refresh(names[1], now - timedelta(minutes=90), frontier))
    RefreshHistory(rest_catalog, config.history_table or "").append(rows)
    return config


def _refresh(view: str, started: datetime, frontier: dict[str, int]) -> HistoryRow:
    result = RefreshResult(view, "incremental", frontier, rows_in=3, rows_out=2,
                           duration_s=1.5, sinks=["iceberg"], engine="local")
    return HistoryRow.of(result, started, frontier)


@pytest.fixture
def served(catalog_server: CatalogServerHandle, pipeline: Config) -> Iterator[RunningServer]:
    running = serve_in_thread(catalog_server.settings, host="127.0.0.1", port=0,
                              routers=pipeline_routers(pipeline))
    try:
        yield running
    finally:
        running.stop()


def test_the_page_shows_each_views_state_lag_slo_refreshes_and_plan(
    served: RunningServer, pipeline: Config,
) -> None:
    page = httpx.get(f"http://127.0.0.1:{served.port}/status", timeout=60)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    busy, idle = (view.name for view in pipeline.views)
    assert f'<section id="{busy}">' in text and f'<section id="{idle}">' in text
    assert "<svg" in text and "Freshness lag over the last hour" in text
    slo = {name: float(text.split(f'<section id="{name}">')[1].split("SLO: ")[1]
                       .split("%")[0]) for name in (busy, idle)}
    # busy: as of 70 minutes ago at the hour's start (the failure at 40 commits nothing),
    # so late from then to its refresh 30 minutes ago, and from 25 to 3 minutes ago:
    # 52 of 60 minutes; idle: refreshed 90 minutes ago, late the whole hour
    assert abs(slo[busy] - 100 * (1 - 52 / 60)) < 1, slo
    assert slo[idle] == 0.0, slo
    busy_section = text.split(f'<section id="{busy}">')[1].split("</section>")[0]
    assert busy_section.count("<td>incremental</td>") == 3
    assert "source &#x27;flights&#x27;: gone" in busy_section
    assert f"[{Law.INVERTIBLE_AGGREGATE}]" in busy_section  # the plan, with its laws


def test_chromium_renders_the_page(served: RunningServer, pipeline: Config,
                                   tmp_path: Path) -> None:
    browser = shutil.which("chromium")
    assert browser, "chromium is missing: scripts/install-system-deps.sh installs it"
    url = f"http://127.0.0.1:{served.port}/status"
    flags = [browser, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "<svg" in dom and pipeline.views[0].name in dom
    assert dom.count("<path") > 10  # the plot's lines, as the browser parsed them
    shot = tmp_path / "status-page.png"
    started = time.monotonic()
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1100,1300", url],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000, \
        f"screenshot of {shot.stat().st_size} bytes after {time.monotonic() - started:.0f} s"
    if os.environ.get("LAKEHOUSE_UPDATE_DOCS") == "1":
        shutil.copy(shot, DOCS / "status-page.png")
