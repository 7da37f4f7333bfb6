"""Server-side scan planning against a real catalog server, pyiceberg writer, httpx client.

The rows of the files a plan names (read with pyarrow) must equal what pyiceberg's own scan
of the same table returns: full, filtered, time-travel and incremental scans, plans split into
plan tasks, and the asynchronous submitted -> completed path.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import GreaterThanOrEqual
from pyiceberg.table import Table

from catalog_api import CatalogSettings, RunningServer, serve_in_thread
from catalog_api.core.config import PlanningSettings

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
ROWS_PER_BATCH = 10
MAX_FILES_PER_RESPONSE = 2
ASYNC_MIN_DATA_FILES = 6
POLL_TIMEOUT_S = 30.0


def _batch(index: int) -> pa.Table:
    ids = list(range(index * ROWS_PER_BATCH, (index + 1) * ROWS_PER_BATCH))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=ARROW_SCHEMA)


@pytest.fixture(scope="module")
def planning_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A catalog whose plans split after 2 files and run asynchronously from 6 data files."""
    root = tmp_path_factory.mktemp("planning")
    settings = CatalogSettings(
        warehouse=(root / "warehouse").as_uri(),
        database_url=f"sqlite:///{root / 'catalog.db'}",
        planning=PlanningSettings(
            max_files_per_response=MAX_FILES_PER_RESPONSE,
            async_min_data_files=ASYNC_MIN_DATA_FILES,
        ),
    )
    (root / "warehouse").mkdir()
    running = serve_in_thread(settings)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def catalog(planning_server: RunningServer) -> RestCatalog:
    rest = RestCatalog("planning", uri=planning_server.uri)
    rest.create_namespace("plans")
    return rest


def _make_table(catalog: RestCatalog, batches: int) -> Table:
    table = catalog.create_table(f"plans.t_{uuid.uuid4().hex[:8]}", schema=ARROW_SCHEMA)
    for index in range(batches):
        table.append(_batch(index))
    return table


@pytest.fixture(scope="module")
def small_table(catalog: RestCatalog) -> Table:
    """Four appends of ten rows: ids 0-9, 10-19, 20-29, 30-39 (one data file each)."""
    return _make_table(catalog, 4)


@pytest.fixture(scope="module")
def large_table(catalog: RestCatalog) -> Table:
    """Seven appends: at or above the asynchronous planning threshold."""
    return _make_table(catalog, ASYNC_MIN_DATA_FILES + 1)


def _url(server: RunningServer, table: Table, suffix: str = "") -> str:
    namespace, name = table.name()
    return f"{server.uri}/v1/namespaces/{namespace}/tables/{name}{suffix}"


def _post_plan(server: RunningServer, table: Table, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(_url(server, table, "/plan"), json=body, timeout=30)


def _await_completion(
    server: RunningServer, table: Table, answer: dict[str, Any]
) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while answer["status"] == "submitted":
        assert time.monotonic() < deadline, "plan did not complete in time"
        time.sleep(0.05)
        response = httpx.get(_url(server, table, f"/plan/{answer['plan-id']}"), timeout=30)
        assert response.status_code == 200, response.text
        plan_id = answer["plan-id"]
        answer = {**response.json(), "plan-id": plan_id}
    return answer


def _collect_tasks(
    server: RunningServer, table: Table, answer: dict[str, Any]
) -> list[dict[str, Any]]:
    """All file scan tasks of a completed plan, fetching its plan tasks; delete files inlined."""
    assert answer["status"] == "completed", answer
    pending = [answer]
    tasks: list[dict[str, Any]] = []
    while pending:
        part = pending.pop()
        deletes = part.get("delete-files", [])
        for task in part.get("file-scan-tasks", []):
            refs = task.get("delete-file-references", [])
            tasks.append({**task, "deletes": [deletes[i] for i in refs]})
        for token in part.get("plan-tasks", []):
            response = httpx.post(_url(server, table, "/tasks"), json={"plan-task": token})
            assert response.status_code == 200, response.text
            pending.append(response.json())
    return tasks


def _read(tasks: list[dict[str, Any]]) -> pa.Table:
    assert all(not task["deletes"] for task in tasks)  # appends only: no delete files
    parts = [pq.read_table(task["data-file"]["file-path"]) for task in tasks]
    return (
        pa.concat_tables(parts).select(ARROW_SCHEMA.names) if parts else ARROW_SCHEMA.empty_table()
    )


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.select(ARROW_SCHEMA.names).to_pylist(), key=lambda row: row["id"])


def _plan_rows(
    server: RunningServer, table: Table, body: dict[str, Any]
) -> tuple[pa.Table, list[dict[str, Any]]]:
    response = _post_plan(server, table, body)
    assert response.status_code == 200, response.text
    answer = _await_completion(server, table, response.json())
    tasks = _collect_tasks(server, table, answer)
    return _read(tasks), tasks


# ------------------------------------------------------------------------- point in time


def test_full_scan_splits_into_plan_tasks(
    planning_server: RunningServer, small_table: Table
) -> None:
    response = _post_plan(planning_server, small_table, {})
    answer = response.json()
    assert response.status_code == 200 and answer["status"] == "completed"
    assert answer["plan-id"]
    assert answer.get("file-scan-tasks", []) == []
    assert len(answer["plan-tasks"]) == 2  # four files, two per response
    tasks = _collect_tasks(planning_server, small_table, answer)
    assert len(tasks) == 4
    assert _sorted(_read(tasks)) == _sorted(small_table.scan().to_arrow())
    data_file = tasks[0]["data-file"]
    assert data_file["content"] == "data"
    assert data_file["file-format"] == "parquet"
    assert data_file["spec-id"] == 0 and data_file["partition"] == []
    assert data_file["record-count"] == ROWS_PER_BATCH
    assert data_file["file-size-in-bytes"] > 0


def test_filtered_scan_prunes_files(planning_server: RunningServer, small_table: Table) -> None:
    body = {"filter": {"type": "gt-eq", "term": "id", "value": 20}}
    rows, tasks = _plan_rows(planning_server, small_table, body)
    assert len(tasks) == 2  # the files of ids 0-19 are pruned by their column bounds
    expected = small_table.scan(row_filter=GreaterThanOrEqual("id", 20)).to_arrow()
    assert _sorted(rows.filter(pc.field("id") >= 20)) == _sorted(expected)
    assert all(task["residual-filter"]["type"] == "gt-eq" for task in tasks)


def test_filter_matching_nothing(planning_server: RunningServer, small_table: Table) -> None:
    body = {
        "filter": {
            "type": "and",
            "left": {"type": "true"},
            "right": {"type": "lt", "term": "id", "value": -5},
        }
    }
    rows, tasks = _plan_rows(planning_server, small_table, body)
    assert tasks == [] and rows.num_rows == 0


def test_time_travel_by_snapshot_id(planning_server: RunningServer, small_table: Table) -> None:
    second = small_table.snapshots()[1]
    rows, tasks = _plan_rows(
        planning_server,
        small_table,
        {"snapshot-id": second.snapshot_id, "use-snapshot-schema": True},
    )
    assert len(tasks) == 2
    assert _sorted(rows) == _sorted(small_table.scan(snapshot_id=second.snapshot_id).to_arrow())


def test_stats_fields(planning_server: RunningServer, small_table: Table) -> None:
    body = {"filter": {"type": "lt", "term": "id", "value": 10}, "stats-fields": ["id"]}
    _, tasks = _plan_rows(planning_server, small_table, body)
    (task,) = tasks
    data_file = task["data-file"]
    assert data_file["lower-bounds"] == {"keys": [1], "values": [0]}
    assert data_file["upper-bounds"] == {"keys": [1], "values": [9]}
    assert data_file["value-counts"] == {"keys": [1], "values": [ROWS_PER_BATCH]}
    _, bare = _plan_rows(planning_server, small_table, {"filter": body["filter"]})
    assert "lower-bounds" not in bare[0]["data-file"]


# --------------------------------------------------------------------------- incremental


def test_incremental_append_scan(planning_server: RunningServer, small_table: Table) -> None:
    snapshots = small_table.snapshots()
    start, end = snapshots[0].snapshot_id, snapshots[2].snapshot_id
    body = {"start-snapshot-id": start, "end-snapshot-id": end}
    rows, tasks = _plan_rows(planning_server, small_table, body)
    assert len(tasks) == 2
    at_end = small_table.scan(snapshot_id=end).to_arrow()
    at_start_ids = set(small_table.scan(snapshot_id=start).to_arrow()["id"].to_pylist())
    added = at_end.filter(pc.invert(pc.is_in(at_end["id"], pa.array(sorted(at_start_ids)))))
    assert _sorted(rows) == _sorted(added) == _sorted(pa.concat_tables([_batch(1), _batch(2)]))


def test_incremental_with_filter(planning_server: RunningServer, small_table: Table) -> None:
    snapshots = small_table.snapshots()
    body = {
        "start-snapshot-id": snapshots[0].snapshot_id,
        "end-snapshot-id": snapshots[3].snapshot_id,
        "filter": {"type": "gt-eq", "term": "id", "value": 25},
    }
    rows, tasks = _plan_rows(planning_server, small_table, body)
    assert len(tasks) == 2
    assert _sorted(rows.filter(pc.field("id") >= 25)) == [
        {"id": i, "name": f"n{i}"} for i in range(25, 40)
    ]


# ------------------------------------------------------------------------- asynchronous


def test_large_plan_is_submitted_then_completed(
    planning_server: RunningServer, large_table: Table
) -> None:
    response = _post_plan(planning_server, large_table, {})
    answer = response.json()
    assert response.status_code == 200 and answer["status"] == "submitted", answer
    assert answer["plan-id"] and "file-scan-tasks" not in answer
    completed = _await_completion(planning_server, large_table, answer)
    assert completed["status"] == "completed"
    tasks = _collect_tasks(planning_server, large_table, completed)
    assert len(tasks) == ASYNC_MIN_DATA_FILES + 1
    assert _sorted(_read(tasks)) == _sorted(large_table.scan().to_arrow())


def test_cancel_plan(planning_server: RunningServer, large_table: Table) -> None:
    answer = _post_plan(planning_server, large_table, {}).json()
    plan_url = _url(planning_server, large_table, f"/plan/{answer['plan-id']}")
    assert httpx.delete(plan_url).status_code == 204
    fetched = httpx.get(plan_url)
    assert fetched.status_code == 200 and fetched.json() == {"status": "cancelled"}


def test_cancel_drops_plan_tasks(planning_server: RunningServer, small_table: Table) -> None:
    answer = _post_plan(planning_server, small_table, {}).json()
    token = answer["plan-tasks"][0]
    assert (
        httpx.delete(_url(planning_server, small_table, f"/plan/{answer['plan-id']}")).status_code
        == 204
    )
    response = httpx.post(_url(planning_server, small_table, "/tasks"), json={"plan-task": token})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchPlanTaskException"


# ------------------------------------------------------------------------------- errors


def _error(response: httpx.Response, code: int, error_type: str) -> str:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert error["type"] == error_type and error["code"] == code
    return str(error["message"])


def test_plan_errors(
    planning_server: RunningServer, small_table: Table, large_table: Table
) -> None:
    snapshots = small_table.snapshots()
    bad = [
        ({"snapshot-id": 12345}, "snapshot-id 12345"),
        ({"filter": {"type": "eq", "term": "nope", "value": 1}}, "nope"),
        ({"filter": {"type": "bogus"}}, "filter"),
        ({"select": ["id", "nope"]}, "select"),
        ({"stats-fields": ["nope"]}, "stats-fields"),
        (
            {
                "snapshot-id": snapshots[0].snapshot_id,
                "start-snapshot-id": snapshots[0].snapshot_id,
                "end-snapshot-id": snapshots[1].snapshot_id,
            },
            "snapshot",
        ),
        ({"start-snapshot-id": snapshots[0].snapshot_id}, "end-snapshot-id"),
        (
            {
                "start-snapshot-id": snapshots[2].snapshot_id,
                "end-snapshot-id": snapshots[1].snapshot_id,
            },
            "not an ancestor",
        ),
    ]
    for body, fragment in bad:
        message = _error(_post_plan(planning_server, small_table, body), 400, "BadRequestException")
        assert fragment in message, (body, message)
    missing = f"{planning_server.uri}/v1/namespaces/plans/tables/missing/plan"
    _error(httpx.post(missing, json={}), 404, "NoSuchTableException")
    plan_url = _url(planning_server, small_table, "/plan/nope")
    _error(httpx.get(plan_url), 404, "NoSuchPlanIdException")
    _error(httpx.delete(plan_url), 404, "NoSuchPlanIdException")
    # a plan task belongs to its table
    token = _post_plan(planning_server, small_table, {}).json()["plan-tasks"][0]
    other = httpx.post(_url(planning_server, large_table, "/tasks"), json={"plan-task": token})
    _error(other, 404, "NoSuchPlanTaskException")


# --------------------------------------------------------------- pyiceberg as the client


def test_config_advertises_planning_endpoints(planning_server: RunningServer) -> None:
    endpoints = set(httpx.get(f"{planning_server.uri}/v1/config").json()["endpoints"])
    table = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    assert {
        f"POST {table}/plan",
        f"GET {table}/plan/{{plan-id}}",
        f"DELETE {table}/plan/{{plan-id}}",
        f"POST {table}/tasks",
        f"GET {table}/credentials",
    } <= endpoints


def test_pyiceberg_uses_server_side_planning(
    planning_server: RunningServer, small_table: Table
) -> None:
    client = RestCatalog(
        "server-planning", uri=planning_server.uri, **{"scan-planning-mode": "server"}
    )
    assert client.supports_server_side_planning()
    table = client.load_table(small_table.name())
    planned = list(table.scan(row_filter=GreaterThanOrEqual("id", 20)).plan_files())
    assert len(planned) == 2
    # files described by the server carry no column stats (none were asked for);
    # pyiceberg's local planning would have them from the manifests
    assert all(not task.file.lower_bounds for task in planned)
    assert _sorted(table.scan().to_arrow()) == _sorted(small_table.scan().to_arrow())
    filtered = table.scan(row_filter=GreaterThanOrEqual("id", 20)).to_arrow()
    assert _sorted(filtered) == _sorted(
        small_table.scan(row_filter=GreaterThanOrEqual("id", 20)).to_arrow()
    )
