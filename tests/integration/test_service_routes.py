"""The pipeline's routes on the catalog service (``/lakehouse/v1``), with authentication on.

A real server (uvicorn on loopback, SQLite) serves the catalog and the routes; the "view" is
an Iceberg table written with pyiceberg, whose snapshots carry a frontier as a refresh's do.
No Spark: the routes read with pyiceberg.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import Table

from catalog_api import serve_in_thread
from lakehouse.config import Config, parse_config
from lakehouse.routes import PREFIX, views_router
from sinks.frontier import FRONTIER_KEY
from tests.conftest_catalog import SecureCatalogHandle, fetch_token, secure_settings
from tests.sse import change_events

VIEW = "v.t"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[SecureCatalogHandle]:
    """A catalog with auth on and the routes: ``admin``, and ``outsider`` (reader elsewhere)."""
    settings, secrets = secure_settings(tmp_path, {"admin": ("admin", None),
                                                   "outsider": ("reader", "elsewhere")})
    running = serve_in_thread(settings, host="127.0.0.1", port=0,
                              routers=[views_router(_config(tmp_path))])
    try:
        yield SecureCatalogHandle(running.uri, tmp_path / "warehouse", settings, running,
                                  secrets)
    finally:
        running.stop()


def _config(root: Path) -> Config:
    return parse_config({"warehouse": str(root / "warehouse"),
                         "sources": {"src": {"iceberg": "v.src"}},
                         "views": [{"name": VIEW, "sql": "SELECT id FROM src"}]})


def _tables(served: SecureCatalogHandle) -> tuple[Table, Table]:
    admin = RestCatalog("admin", uri=served.uri, credential=served.credential("admin"),
                        **{"oauth2-server-uri": f"{served.uri}/v1/oauth/tokens"})
    admin.create_namespace("v")
    schema = pa.schema([pa.field("id", pa.int64())])
    return admin.create_table("v.src", schema), admin.create_table(VIEW, schema)


def _commit(table: Table, ids: list[int], frontier: dict[str, int]) -> int:
    table.append(pa.table({"id": pa.array(ids, pa.int64())}),
                 snapshot_properties={FRONTIER_KEY: json.dumps(frontier)})
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def test_changes_stream_each_snapshot_once_and_resume_after_the_last_event_id(
    served: SecureCatalogHandle,
) -> None:
    source, view = _tables(served)
    first = _commit(view, [1, 2], {"src": _commit(source, [1], {})})
    url = f"{served.uri.removesuffix('/iceberg')}{PREFIX}/views/{VIEW}/changes"
    headers = served.headers("admin")
    with httpx.stream("GET", url, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        initial = change_events(lines, 1)
        second = _commit(view, [3], {"src": 0})
        (change,) = change_events(lines, 1)
    assert [int(initial[0]["id"]), int(change["id"])] == [first, second]
    assert sorted(json.loads(initial[0]["data"])["rows"], key=str) == [
        {"id": 1, "_weight": 1}, {"id": 2, "_weight": 1}]
    assert json.loads(change["data"])["rows"] == [{"id": 3, "_weight": 1}]
    with httpx.stream("GET", url, timeout=30,
                      headers=headers | {"Last-Event-ID": str(first)}) as resumed:
        (again,) = change_events(resumed.iter_lines(), 1)
    assert int(again["id"]) == second  # the one after the last event seen


def test_wait_answers_the_first_snapshot_reflecting_a_source_snapshot(
    served: SecureCatalogHandle,
) -> None:
    source, view = _tables(served)
    earlier = _commit(source, [0], {})
    _commit(view, [0], {"src": earlier})  # before the snapshot waited for: does not reflect it
    produced = _commit(source, [1], {})
    reflecting = _commit(view, [1], {"src": produced})
    _commit(view, [2], {"src": produced})  # a later snapshot reflects it too
    later = _commit(source, [2], {})
    url = f"{served.uri.removesuffix('/iceberg')}{PREFIX}/views/{VIEW}/wait"
    headers = served.headers("admin")
    found = httpx.get(url, headers=headers, params={"source": "src", "snapshot": produced},
                      timeout=30)
    assert found.status_code == 200 and found.json() == {"view": VIEW,
                                                         "snapshot_id": reflecting}
    late = httpx.get(url, headers=headers, timeout=30,
                     params={"source": "src", "snapshot": later, "timeout_s": 0.3})
    assert late.status_code == 408, late.text
    error = late.json()["error"]
    assert error["type"] == "WaitTimeoutException" and "refreshing" in error["message"]
    unknown = httpx.get(url, headers=headers, timeout=30,
                        params={"source": "src", "snapshot": 12345})
    assert unknown.status_code == 400 and "no snapshot 12345" in unknown.json()["error"][
        "message"]


def test_the_routes_check_who_is_calling(served: SecureCatalogHandle) -> None:
    _tables(served)
    base = f"{served.uri.removesuffix('/iceberg')}{PREFIX}/views"
    assert httpx.get(f"{base}/{VIEW}/changes", timeout=30).status_code == 401
    outsider = {"Authorization": "Bearer " + fetch_token(served.uri, "outsider",
                                                         served.secrets["outsider"])}
    refused = httpx.get(f"{base}/{VIEW}/changes", headers=outsider, timeout=30)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == 403
    waiting = httpx.get(f"{base}/{VIEW}/wait", headers=outsider, timeout=30,
                        params={"source": "src", "snapshot": 1})
    assert waiting.status_code == 403, waiting.text
    missing = httpx.get(f"{base}/nope.nope/wait", headers=served.headers("admin"), timeout=30,
                        params={"source": "src", "snapshot": 1})
    assert missing.status_code == 404
    spoofed = httpx.get(f"{base}/{VIEW}/wait", timeout=30, params={
        "source": "src", "snapshot": 1}, headers=served.headers("admin") | {
        "Host": "attacker.invalid:9"})  # the service calls itself at its own address
    assert spoofed.status_code == 400 and "no snapshot 1" in spoofed.text, spoofed.text
