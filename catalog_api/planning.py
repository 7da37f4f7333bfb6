"""Server-side scan planning with pyiceberg: which files (and delete files) a scan reads.

Implements the planning semantics of ``planTableScan`` (REST spec 1.11.0,
``POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan``):

- point-in-time scans: the main branch's current snapshot, or ``snapshot-id``;
- incremental append scans: ``start-snapshot-id`` (exclusive) to ``end-snapshot-id``
  (inclusive) return the data files that append snapshots in that range added (as Iceberg
  Java's ``IncrementalAppendScan``; overwrite and delete snapshots are skipped);
- ``filter`` (the spec's Expression JSON), ``case-sensitive``, ``select`` and
  ``stats-fields`` (validated against the schema), ``use-snapshot-schema``.

The request is validated synchronously (:func:`prepare_scan`, 400 on any fault) and the
manifests are read afterwards (:meth:`PreparedScan.plan`), possibly in a background thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field
from pyiceberg.catalog.rest.scan_planning import (
    PlanTableScanRequest,
    RESTDeleteFile,
    RESTFileScanTask,
    ScanTasks,
)
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, ManifestGroupPlanner, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.typedef import IcebergBaseModel

from catalog_api.content_files import rest_data_file, rest_delete_file
from catalog_api.errors import BadRequestError
from catalog_api.expressions import parse_expression


class PlanTableScanBody(PlanTableScanRequest):
    """``PlanTableScanRequest`` whose ``filter`` stays raw JSON until :func:`parse_expression`.

    pyiceberg's model parses ``filter`` itself, but fails on parts of the spec's Expression
    JSON (``{"type": "true"}``); the checks of snapshot ids are pyiceberg's.
    """

    filter: dict[str, Any] | bool | None = Field(default=None)  # type: ignore[assignment]


@dataclass(frozen=True)
class PreparedScan:
    """A validated scan request, ready to read manifests.

    Attributes:
        table: The table (its metadata and FileIO).
        row_filter: The unbound filter.
        case_sensitive: Whether column names match case-sensitively.
        snapshot: The snapshot scanned (the end snapshot of an incremental scan); None for
            a table without snapshots.
        start_snapshot_id: Exclusive start of an incremental scan; None for a point-in-time
            scan unless ``incremental`` is set.
        incremental: Whether this is an incremental append scan.
        stats_field_ids: Field ids whose column stats are sent.
    """

    table: Table
    row_filter: BooleanExpression
    case_sensitive: bool
    snapshot: Snapshot | None
    start_snapshot_id: int | None
    incremental: bool
    stats_field_ids: frozenset[int]

    @property
    def total_data_files(self) -> int:
        """Data files of the scanned snapshot per its summary (0 when unknown)."""
        summary = self.snapshot.summary if self.snapshot is not None else None
        try:
            return int(str(summary["total-data-files"])) if summary is not None else 0
        except (KeyError, ValueError):
            return 0

    def plan(self) -> list[FileScanTask]:
        """Read the manifests and return the file scan tasks.

        Returns:
            One task per data file (with its delete files and residual filter).

        Raises:
            ValueError: If pyiceberg cannot plan the scan (e.g. equality deletes).
        """
        if self.snapshot is None:
            return []
        if self.incremental:
            return self._plan_appends()
        scan = self.table.scan(
            row_filter=self.row_filter,
            case_sensitive=self.case_sensitive,
            snapshot_id=self.snapshot.snapshot_id,
        )
        return list(scan.plan_files())

    def _plan_appends(self) -> list[FileScanTask]:
        assert self.snapshot is not None
        snapshots = appends_between(self.table.metadata, self.start_snapshot_id, self.snapshot)
        ids = {snapshot.snapshot_id for snapshot in snapshots}
        manifests: dict[str, ManifestFile] = {}
        for snapshot in snapshots:
            for manifest in snapshot.manifests(self.table.io):
                if manifest.content == ManifestContent.DATA and manifest.added_snapshot_id in ids:
                    manifests.setdefault(manifest.manifest_path, manifest)

        def added_in_range(entry: ManifestEntry) -> bool:
            return entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id in ids

        planner = ManifestGroupPlanner(
            self.table.metadata, self.table.io, self.row_filter, self.case_sensitive
        )
        return list(planner.plan_files(manifests.values(), added_in_range))


def appends_between(
    metadata: TableMetadata, start_snapshot_id: int | None, end: Snapshot
) -> list[Snapshot]:
    """The append snapshots after ``start`` (exclusive) up to ``end`` (inclusive).

    Args:
        metadata: The table's metadata.
        start_snapshot_id: Exclusive start; None means from the first snapshot.
        end: The end snapshot.

    Returns:
        The append snapshots, newest first.

    Raises:
        BadRequestError: If ``start_snapshot_id`` is not an ancestor of ``end``.
    """
    found: list[Snapshot] = []
    current: Snapshot | None = end
    while current is not None and current.snapshot_id != start_snapshot_id:
        if current.summary is not None and current.summary.operation == Operation.APPEND:
            found.append(current)
        parent = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent) if parent is not None else None
    if start_snapshot_id is not None and current is None:
        raise BadRequestError(
            f"start-snapshot-id {start_snapshot_id} is not an ancestor of "
            f"end-snapshot-id {end.snapshot_id}"
        )
    return found


def _snapshot(metadata: TableMetadata, snapshot_id: int, key: str) -> Snapshot:
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise BadRequestError(f"{key} {snapshot_id} is not a snapshot of the table")
    return snapshot


def _scan_schema(table: Table, request: PlanTableScanBody, snapshot: Snapshot | None) -> Schema:
    metadata = table.metadata
    if request.use_snapshot_schema and snapshot is not None and snapshot.schema_id is not None:
        schemas = metadata.schema_by_id(snapshot.schema_id)
        if schemas is not None:
            return schemas
    return metadata.schema()


def _field_ids(schema: Schema, names: list[str] | None, case_sensitive: bool, key: str) -> set[int]:
    ids: set[int] = set()
    for name in names or []:
        if name == "*":
            ids.update(schema.field_ids)
            continue
        try:
            ids.add(schema.find_field(name, case_sensitive).field_id)
        except ValueError as exc:
            raise BadRequestError(f"{key}: no field '{name}' in the table schema") from exc
    return ids


def _resolve_snapshot(table: Table, request: PlanTableScanBody) -> tuple[Snapshot | None, bool]:
    metadata = table.metadata
    if request.end_snapshot_id is not None:
        if request.snapshot_id is not None:
            raise BadRequestError("Cannot specify both snapshot-id and end-snapshot-id")
        if request.start_snapshot_id is not None:
            _snapshot(metadata, request.start_snapshot_id, "start-snapshot-id")
        return _snapshot(metadata, request.end_snapshot_id, "end-snapshot-id"), True
    if request.snapshot_id is not None:
        return _snapshot(metadata, request.snapshot_id, "snapshot-id"), False
    return table.current_snapshot(), False


def prepare_scan(table: Table, request: PlanTableScanBody) -> PreparedScan:
    """Validate a plan request against a table.

    Args:
        table: The table to scan.
        request: The request body.

    Returns:
        The validated scan.

    Raises:
        BadRequestError: If a snapshot id is unknown, the start snapshot is not an ancestor
            of the end snapshot, or the filter, ``select`` or ``stats-fields`` name a column
            the schema lacks (or are malformed).
    """
    snapshot, incremental = _resolve_snapshot(table, request)
    if incremental and snapshot is not None:
        appends_between(table.metadata, request.start_snapshot_id, snapshot)
    schema = _scan_schema(table, request, snapshot)
    case_sensitive = request.case_sensitive
    row_filter: BooleanExpression = AlwaysTrue()
    if request.filter is not None:
        row_filter = parse_expression(request.filter)
        try:
            bind(schema, row_filter, case_sensitive)
        except ValueError as exc:
            raise BadRequestError(f"filter: {exc}") from exc
    _field_ids(schema, request.select, case_sensitive, "select")
    stats_ids = _field_ids(schema, request.stats_fields, case_sensitive, "stats-fields")
    return PreparedScan(
        table=table,
        row_filter=row_filter,
        case_sensitive=case_sensitive,
        snapshot=snapshot,
        start_snapshot_id=request.start_snapshot_id,
        incremental=incremental,
        stats_field_ids=frozenset(stats_ids),
    )


def scan_tasks(
    tasks: list[FileScanTask], metadata: TableMetadata, stats_field_ids: frozenset[int]
) -> ScanTasks:
    """Serialize file scan tasks as the spec's ``ScanTasks`` (delete files listed once).

    Args:
        tasks: File scan tasks from :meth:`PreparedScan.plan`.
        metadata: The table's metadata.
        stats_field_ids: Field ids whose column stats are sent.

    Returns:
        ``file-scan-tasks`` with ``delete-file-references`` into ``delete-files``.
    """
    delete_index: dict[str, int] = {}
    delete_files: list[RESTDeleteFile] = []
    rest_tasks: list[RESTFileScanTask] = []
    for task in tasks:
        references = []
        for delete_file in sorted(task.delete_files, key=lambda f: f.file_path):
            if delete_file.file_path not in delete_index:
                delete_index[delete_file.file_path] = len(delete_files)
                delete_files.append(rest_delete_file(delete_file, metadata))
            references.append(delete_index[delete_file.file_path])
        residual = None if task.residual == AlwaysTrue() else task.residual
        rest_tasks.append(
            RESTFileScanTask.model_validate(
                {
                    "data-file": rest_data_file(task.file, metadata, stats_field_ids),
                    "delete-file-references": references or None,
                    "residual-filter": residual,
                }
            )
        )
    return ScanTasks.model_validate({"delete-files": delete_files, "file-scan-tasks": rest_tasks})


def _lowercase_format(content_file: dict[str, Any]) -> dict[str, Any]:
    if isinstance(content_file.get("file-format"), str):
        content_file["file-format"] = content_file["file-format"].lower()
    return content_file


def planning_json(result: IcebergBaseModel) -> dict[str, Any]:
    """Dump a planning answer (``ScanTasks``, ``PlanCompleted``, ...) as the spec's JSON.

    pyiceberg's models write ``file-format`` upper-case (``PARQUET``); the spec's
    ``FileFormat`` enum is lower-case (pyiceberg reads either). ``residual-filter`` is
    declared as the abstract ``BooleanExpression``, hence ``serialize_as_any``.

    Args:
        result: A pyiceberg scan-planning model.

    Returns:
        The JSON object (aliases, no nulls).
    """
    body: dict[str, Any] = result.model_dump(
        mode="json", by_alias=True, exclude_none=True, serialize_as_any=True
    )
    for delete_file in body.get("delete-files", []):
        _lowercase_format(delete_file)
    for task in body.get("file-scan-tasks", []):
        _lowercase_format(task["data-file"])
    return body


def split_tasks(tasks: list[FileScanTask], size: int) -> list[list[FileScanTask]]:
    """Split tasks into batches of at most ``size`` (one empty batch for no tasks).

    Args:
        tasks: File scan tasks.
        size: Batch size (> 0).

    Returns:
        The batches, in order.
    """
    return [tasks[i : i + size] for i in range(0, len(tasks), size)] or [[]]
