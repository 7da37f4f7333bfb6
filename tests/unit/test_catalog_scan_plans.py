"""Plan life cycle (catalog_api.scan_plans) and ContentFile JSON (catalog_api.content_files)."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
from pyiceberg.catalog.rest.scan_planning import ScanTasks
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, LongType, NestedField, StringType

from catalog_api.content_files import rest_data_file, rest_delete_file
from catalog_api.core.config import PlanningSettings
from catalog_api.errors import BadRequestError
from catalog_api.planning import planning_json, scan_tasks
from catalog_api.scan_plans import NoSuchPlanIdError, NoSuchPlanTaskError, ScanPlanRegistry

TABLE = ("db", "t")


def _registry(**kwargs: float) -> ScanPlanRegistry:
    return ScanPlanRegistry(PlanningSettings(**kwargs))  # type: ignore[arg-type]


def _wait(registry: ScanPlanRegistry, plan_id: str) -> object:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        result = registry.fetch(TABLE, plan_id)
        if result.status != "submitted":
            return result
        time.sleep(0.01)
    raise AssertionError("plan did not finish")


def test_background_failure_is_reported_as_failed() -> None:
    registry = _registry()

    def boom() -> list[ScanTasks]:
        raise BadRequestError("no such column")

    submitted = registry.submit(TABLE, boom, run_async=True)
    assert submitted.status == "submitted"
    failed = _wait(registry, submitted.plan_id)  # type: ignore[union-attr]
    assert failed.status == "failed"  # type: ignore[attr-defined]
    assert failed.error.code == 400 and "no such column" in failed.error.message  # type: ignore[attr-defined]
    registry.close()


def test_submitted_stays_submitted_until_done_and_cancel_wins() -> None:
    registry = _registry()
    release = threading.Event()

    def slow() -> list[ScanTasks]:
        release.wait(10)
        return [ScanTasks(), ScanTasks()]

    submitted = registry.submit(TABLE, slow, run_async=True)
    plan_id = submitted.plan_id  # type: ignore[union-attr]
    assert registry.fetch(TABLE, plan_id).model_dump(by_alias=True) == {"status": "submitted"}
    registry.cancel(TABLE, plan_id)
    release.set()
    time.sleep(0.05)
    assert registry.fetch(TABLE, plan_id).status == "cancelled"
    registry.close()


def test_plans_belong_to_their_table_and_expire() -> None:
    registry = _registry(result_ttl_s=0.05)
    completed = registry.submit(TABLE, lambda: [ScanTasks(), ScanTasks()], run_async=False)
    token = completed.plan_tasks[0]  # type: ignore[union-attr]
    with pytest.raises(NoSuchPlanIdError):
        registry.fetch(("db", "other"), completed.plan_id)  # type: ignore[union-attr]
    with pytest.raises(NoSuchPlanTaskError):
        registry.fetch_tasks(("db", "other"), token)
    assert registry.fetch_tasks(TABLE, token) == ScanTasks()
    time.sleep(0.1)
    with pytest.raises(NoSuchPlanTaskError):
        registry.fetch_tasks(TABLE, token)
    with pytest.raises(NoSuchPlanIdError):
        registry.fetch(TABLE, completed.plan_id)  # type: ignore[union-attr]
    registry.close()


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "day", DateType(), required=False),
    NestedField(3, "name", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(2, 1000, DayTransform(), "day_day"),
    PartitionField(3, 1001, IdentityTransform(), "name"),
)
METADATA = new_table_metadata(SCHEMA, SPEC, UNSORTED_SORT_ORDER, "file:///wh/t", {})
DAY = (datetime.date(2024, 3, 1) - datetime.date(1970, 1, 1)).days


def _file(content: DataFileContent, path: str, **extra: object) -> DataFile:
    data_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(DAY, "x"),
        record_count=5,
        file_size_in_bytes=100,
        **extra,
    )
    data_file.spec_id = 0
    return data_file


def test_data_file_partition_and_bounds_use_spec_json() -> None:
    data_file = _file(
        DataFileContent.DATA,
        "file:///wh/t/data/a.parquet",
        lower_bounds={1: to_bytes(LongType(), 3), 2: to_bytes(DateType(), DAY)},
        upper_bounds={1: to_bytes(LongType(), 9), 2: to_bytes(DateType(), DAY)},
        value_counts={1: 5, 2: 5},
    )
    rest = rest_data_file(data_file, METADATA, {1, 2})
    body = rest.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert body["partition"] == ["2024-03-01", "x"]
    assert body["lower-bounds"] == {"keys": [1, 2], "values": [3, "2024-03-01"]}
    assert body["upper-bounds"] == {"keys": [1, 2], "values": [9, "2024-03-01"]}
    assert "lower-bounds" not in rest_data_file(data_file, METADATA).model_dump(
        by_alias=True, exclude_none=True
    )


def test_delete_files_are_listed_once_and_referenced() -> None:
    from pyiceberg.table import FileScanTask

    deletes = _file(DataFileContent.POSITION_DELETES, "file:///wh/t/data/d.parquet")
    eq = _file(DataFileContent.EQUALITY_DELETES, "file:///wh/t/data/e.parquet", equality_ids=[1])
    tasks = [
        FileScanTask(_file(DataFileContent.DATA, "file:///wh/t/data/a.parquet"), {deletes}),
        FileScanTask(_file(DataFileContent.DATA, "file:///wh/t/data/b.parquet"), {deletes, eq}),
    ]
    body = planning_json(scan_tasks(tasks, METADATA, frozenset()))
    assert [f["content"] for f in body["delete-files"]] == ["position-deletes", "equality-deletes"]
    assert body["delete-files"][1]["equality-ids"] == [1]
    assert all(f["file-format"] == "parquet" for f in body["delete-files"])
    assert [t["delete-file-references"] for t in body["file-scan-tasks"]] == [[0], [0, 1]]
    assert "residual-filter" not in body["file-scan-tasks"][0]
    with pytest.raises(ValueError):
        rest_delete_file(tasks[0].file, METADATA)
