"""The ``refresh-state`` of a view's commit, after the Iceberg materialized-view proposal.

The proposal (apache/iceberg pull request 11041, ``format/view-spec.md``, sections "Storage
table metadata", "Refresh state" and "Source state") stores in the snapshot summary of the
storage table, under ``refresh-state``, a JSON record::

    {"view-version-id": 1, "refresh-start-timestamp-ms": 1573518435000,
     "source-states": [{"type": "table", "namespace": ["default"], "name": "events",
                        "uuid": "d4a10b5c-...", "snapshot-id": 6148331192489823102}]}

Where it fits here: every sink commit carries it (Iceberg: snapshot summary and table
properties; Delta: commit info ``userMetadata``), next to :data:`sinks.frontier.FRONTIER_KEY`,
which recovery reads. Iceberg sources (tables and views maintained here, which are Iceberg
tables) are recorded as ``table`` states. Delta sources are not Iceberg objects; the proposal
lets producers skip such dependencies, and their versions stay in the frontier. A view here
is not (yet) an Iceberg view object, so ``view-version-id`` is the caller's version of its
definition (1 unless given).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pyiceberg.catalog import Catalog

from sinks.errors import SinkError
from sinks.frontier import (
    ENGINE_KEY,
    FRONTIER_KEY,
    REFRESHED_AT_KEY,
    Frontier,
    encode_frontier,
)

REFRESH_STATE_KEY = "refresh-state"
"""Snapshot summary / table property / commit info key holding the refresh state (JSON)."""


@dataclass(frozen=True)
class SourceTable:
    """Where one source of a view lives: exactly one of ``iceberg`` and ``delta``.

    Attributes:
        iceberg: ``namespace.table`` in the view's catalog (a source view's table too).
        delta: Path or URI of a Delta table.
        ref: The Iceberg branch or tag the view reads (``main`` by default).
    """

    iceberg: str | None = None
    delta: str | None = None
    ref: str = "main"


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True)


class SourceTableState(_Model):
    """One ``table`` entry of ``source-states`` (proposal: "Source table state")."""

    type: Literal["table"] = "table"
    name: str
    namespace: list[str]
    uuid: str
    snapshot_id: int = Field(alias="snapshot-id")
    ref: str | None = None


class RefreshState(_Model):
    """The ``refresh-state`` record (proposal: "Refresh state")."""

    view_version_id: int = Field(alias="view-version-id")
    refresh_start_timestamp_ms: int = Field(alias="refresh-start-timestamp-ms")
    source_states: list[SourceTableState] = Field(alias="source-states")

    def to_json(self) -> str:
        """The record as the JSON string stored under :data:`REFRESH_STATE_KEY`."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


class RefreshStates:
    """Builds the refresh state of each commit of one view.

    Table uuids are looked up in the catalog once per instance (one ``loadTable`` per
    Iceberg source); keep one instance per view for the life of the process.

    Args:
        sources: Source name (as in the frontier) -> where it lives.
        catalog: The catalog holding the Iceberg sources (None: no source states recorded).
        view_version_id: Version of the view's definition.
    """

    def __init__(self, sources: Mapping[str, SourceTable], catalog: Catalog | None = None,
                 view_version_id: int = 1):
        self.sources = dict(sources)
        self.catalog = catalog
        self.view_version_id = view_version_id
        self._uuids: dict[str, str] = {}

    def state(self, frontier: Frontier, started_ms: int | None = None) -> RefreshState:
        """The refresh state of a commit reflecting ``frontier``.

        Args:
            frontier: Source name -> snapshot id / Delta version after the commit.
            started_ms: When the refresh started (ms since epoch); now if None.

        Raises:
            SinkError: An Iceberg source could not be loaded from the catalog.
        """
        states = [self._table_state(name, self.sources[name], snapshot_id)
                  for name, snapshot_id in sorted(frontier.items())
                  if name in self.sources and self.sources[name].iceberg is not None
                  and self.catalog is not None]
        return RefreshState.model_validate({
            "view-version-id": self.view_version_id,
            "refresh-start-timestamp-ms": started_ms if started_ms is not None else now_ms(),
            "source-states": states,
        })

    def _table_state(self, name: str, source: SourceTable, snapshot_id: int) -> SourceTableState:
        identifier = source.iceberg or ""
        *namespace, table = identifier.split(".")
        return SourceTableState.model_validate({
            "name": table, "namespace": namespace, "uuid": self._uuid(name, identifier),
            "snapshot-id": snapshot_id, "ref": None if source.ref == "main" else source.ref,
        })

    def _uuid(self, name: str, identifier: str) -> str:
        if identifier not in self._uuids:
            assert self.catalog is not None
            try:
                metadata = self.catalog.load_table(identifier).metadata
            except Exception as error:  # catalog clients raise many types; report them as one
                raise SinkError(f"cannot load source {name!r} for its refresh state: {error}",
                                table=identifier) from error
            self._uuids[identifier] = str(metadata.table_uuid)
        return self._uuids[identifier]


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


def freshness_properties(frontier: Frontier, state: RefreshState,
                         engine: str | None = None) -> dict[str, str]:
    """What each sink commit records: frontier, commit time, the refresh state, the engine.

    Returns:
        ``{lakehouse.frontier, lakehouse.refreshed-at-ms, refresh-state}`` as strings, and
        ``lakehouse.engine`` when ``engine`` is given.
    """
    properties = {FRONTIER_KEY: encode_frontier(frontier), REFRESHED_AT_KEY: str(now_ms()),
                  REFRESH_STATE_KEY: state.to_json()}
    if engine is not None:
        properties[ENGINE_KEY] = engine
    return properties
