"""Aggregate states kept in the warehouse, so that a new process resumes without rebuilding them.

A view maintained by the invertible-aggregate law reads its state (sums and counts per group)
at the frontier its sinks reflect. The state is a pure function of the view's SQL and of the
sources at that frontier, so it is stored under a name made of both: one Parquet file,
``<warehouse>/_state/<view>/<sql digest>-<frontier digest>.parquet``, written once after the
sinks committed that frontier (a new file, never an overwrite: on S3 a PUT appears whole or
not at all; locally it is written beside and renamed). A crash before the write only costs
the next process a rebuild; a state of another SQL or frontier is never read.

Only states held on the driver (Arrow, at most ``ivm.DRIVER_STATE_MAX_ROWS`` groups) are
stored today; a state held on Spark is rebuilt by a new process.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql.types import StructType

from ivm import AggregateState
from lakehouse.storage import Folder

__all__ = ["StateStore"]

ARG_TYPES_KEY = b"lakehouse.arg-types"
"""Parquet metadata key: the Spark type of each aggregate argument (JSON list)."""
FRONTIER_KEY = b"lakehouse.frontier"
"""Parquet metadata key: the frontier the state reflects (JSON object)."""
SCHEMA_KEY = b"lakehouse.view-schema"
"""Parquet metadata key: the view's columns as Spark types them (Spark's schema JSON), so
that a tick from the stored state needs no Spark analysis, hence no JVM."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StateStore:
    """The aggregate states of a pipeline's views, in one folder of the warehouse.

    Args:
        folder: Where the states live (:func:`lakehouse.storage.warehouse_folder`,
            ``_state``), on the warehouse's storage.
    """

    def __init__(self, folder: Folder):
        self.folder = folder

    def _file(self, view: str, sql: str, frontier: Mapping[str, int]) -> Folder:
        name = f"{_digest(sql)}-{_digest(json.dumps(dict(frontier), sort_keys=True))}.parquet"
        return self.folder.child(view).child(name)

    def load(self, view: str, sql: str, frontier: Mapping[str, int]) -> AggregateState | None:
        """The state of ``view`` (compiled from ``sql``) at ``frontier``, or None if not stored.

        Raises:
            OSError: The storage cannot be read (other than the file being absent).
        """
        file = self._file(view, sql, frontier)
        if file.filesystem.get_file_info(file.path).type != pafs.FileType.File:
            return None
        table = pq.read_table(file.path, filesystem=file.filesystem)
        metadata = table.schema.metadata or {}
        arg_types = tuple(json.loads(metadata[ARG_TYPES_KEY]))
        schema = (StructType.fromJson(json.loads(metadata[SCHEMA_KEY]))
                  if SCHEMA_KEY in metadata else None)
        return AggregateState(arg_types, table=table.replace_schema_metadata(None), schema=schema)

    def save(self, view: str, sql: str, frontier: Mapping[str, int],
             state: AggregateState | None) -> None:
        """Store ``state`` as the state of ``view`` at ``frontier``; drop the view's others.

        A state held on Spark (or None) is not stored; the view's stored states are still
        dropped, since none is at the new frontier.

        Raises:
            OSError: The storage cannot be written.
        """
        keep = None
        if state is not None and state.table is not None:
            keep = self._file(view, sql, frontier)
            metadata = {ARG_TYPES_KEY: json.dumps(list(state.arg_types)).encode(),
                        FRONTIER_KEY: json.dumps(dict(frontier), sort_keys=True).encode()}
            if state.schema is not None:
                metadata[SCHEMA_KEY] = state.schema.json().encode()
            self._write(keep, state.table.replace_schema_metadata(metadata))
        self._drop_others(view, keep)

    def _write(self, file: Folder, table: pa.Table) -> None:
        file.filesystem.create_dir(file.path.rsplit("/", 1)[0], recursive=True)
        if isinstance(file.filesystem, pafs.LocalFileSystem):  # rename: whole or absent
            staging = f"{file.path}.{uuid.uuid4().hex}.tmp"
            pq.write_table(table, staging, filesystem=file.filesystem)
            file.filesystem.move(staging, file.path)
        else:  # an object store's PUT is atomic
            pq.write_table(table, file.path, filesystem=file.filesystem)

    def _drop_others(self, view: str, keep: Folder | None) -> None:
        folder = self.folder.child(view)
        selector = pafs.FileSelector(folder.path, allow_not_found=True)
        for info in folder.filesystem.get_file_info(selector):
            if (info.type == pafs.FileType.File and info.path.endswith(".parquet")
                    and (keep is None or info.path != keep.path)):  # not another's staging
                folder.filesystem.delete_file(info.path)
