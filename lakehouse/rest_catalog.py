"""pyiceberg's REST client, its table loads conditional on the metadata they hold.

Every tick reads its sources' metadata, and every poll of an ``on_change`` view its
sources' current versions: a table load each, whose answer is the table's whole metadata
(every snapshot kept), parsed and validated by pydantic. On the soak benchmark (a source
committing every second, a few hundred snapshots kept, eight views) those parses took a
quarter of the pipeline process's interpreter lock, which its ticks need, for metadata
that had not changed since the last load.

The REST spec's ``loadTable`` answers a request whose ``If-None-Match`` names the current
ETag with 304 and no body (Iceberg REST spec 1.11.0, ``loadTable``; RFC 9110 section
13.1.2). This client remembers, per table and ``snapshots`` mode, the last answer that
carried an ETag; it sends that ETag and, on a 304, builds a new :class:`Table` over the
metadata it already parsed (metadata is immutable; each load gets a ``Table`` of its own,
since a commit through a ``Table`` replaces that object's metadata). pyiceberg 0.12 sends
no ``If-None-Match`` itself.

A commit's answer carries the new metadata and its ETag (spec, ``CommitTableResponse``
headers): this client remembers it as the table's last load, so the next tick's read of a
view table it just committed to is answered 304 instead of parsing the metadata it already
holds (a twentieth of the pipeline's interpreter-lock samples on the soak benchmark).

An answer with vended credentials or a remote-signing config is not remembered: the
service builds those per request (and the credentials expire), so they are never answered
304 (:func:`catalog_api.api.routes.tables.load_table`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache
from pyiceberg.catalog.rest import (
    _RETRY_ARGS,
    SNAPSHOT_LOADING_MODE,
    Capability,
    Endpoints,
    RestCatalog,
    TableResponse,
)
from pyiceberg.catalog.rest.response import _handle_non_200_response
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import Identifier
from requests import HTTPError, Response
from tenacity import retry

from catalog_api.metadata_files import ServerDeletesMetadata

__all__ = ["LOADS_KEPT", "ConditionalRestCatalog"]

LOADS_KEPT = 256
"""Table loads remembered (least recently used dropped): a pipeline's sources and sinks."""

_CREDENTIAL_PREFIXES = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token",
                        "s3.signer", "s3.remote-signing", "adls.sas-token", "gcs.oauth2.token")
"""Config key prefixes of per-request answers (vended credentials, remote signing; ADLS
keys carry the account after the prefix)."""


@dataclass(frozen=True)
class _Loaded:
    """A load's answer: its ETag, the parsed metadata, and what a ``Table`` is built from."""

    etag: str
    metadata_location: str
    metadata: TableMetadata
    io: FileIO
    config: dict[str, str]

    def table(self, identifier: tuple[str, ...], catalog: RestCatalog) -> Table:
        """A new ``Table`` over this answer's metadata."""
        return Table(identifier=identifier, metadata=self.metadata,
                     metadata_location=self.metadata_location, io=self.io, catalog=catalog,
                     config=self.config)


class ConditionalRestCatalog(ServerDeletesMetadata, RestCatalog):
    """A pyiceberg ``RestCatalog`` whose ``load_table`` sends the last answer's ETag.

    Safe to share between threads, as ``RestCatalog`` is.

    Args:
        name: The catalog's name.
        **properties: ``RestCatalog``'s properties.
    """

    def __init__(self, name: str, **properties: Any):
        super().__init__(name, **properties)
        self._loads: LRUCache[tuple[tuple[str, ...], str], _Loaded] = LRUCache(LOADS_KEPT)
        self._loads_lock = threading.Lock()
        self._last_etag = threading.local()  # the ETag of this thread's last answer
        self._session.hooks["response"].append(self._note_etag)

    @retry(**_RETRY_ARGS)  # type: ignore[call-overload]  # pyiceberg's dict[str, object]
    def load_table(self, identifier: str | Identifier) -> Table:
        """Load the table's metadata: the one already parsed when the catalog answers 304.

        Raises:
            NoSuchTableError: No such table.
            ValueError: An invalid ``snapshot-loading-mode`` property.
            RESTError: Any other refusal (pyiceberg's errors by status code).
        """
        self._check_endpoint(Capability.V1_LOAD_TABLE)
        mode = self.properties.get(SNAPSHOT_LOADING_MODE)
        if mode is not None and mode not in {"all", "refs"}:
            raise ValueError(f"Invalid snapshot-loading-mode: {mode}")
        params = {"snapshots": mode} if mode else {}
        key = self._key(identifier)
        with self._loads_lock:
            known = self._loads.get(key)
        url = self.url(Endpoints.load_table, prefixed=True,
                       **self._split_identifier_for_path(identifier))
        headers = {"If-None-Match": known.etag} if known is not None else {}
        response = self._session.get(url, params=params, headers=headers)
        if response.status_code == 304 and known is not None:
            return known.table(key[0], self)
        try:
            response.raise_for_status()
        except HTTPError as exc:
            _handle_non_200_response(exc, {404: NoSuchTableError})
        answer = TableResponse.model_validate_json(response.text)
        table = self._response_to_table(key[0], answer)
        self._remember(key, response.headers.get("ETag"), answer, table)
        return table

    def commit_table(self, table: Table, requirements: tuple[TableRequirement, ...],
                     updates: tuple[TableUpdate, ...]) -> CommitTableResponse:
        """Commit as ``RestCatalog`` does, and remember the answer as the table's last load.

        Only when the table's last load was remembered (its answer was not per request)
        with every snapshot, as a commit answers: the new answer keeps that load's FileIO
        and config.

        Raises:
            CommitFailedException: A requirement failed (pyiceberg's errors by status).
        """
        self._last_etag.value = None
        answer = super().commit_table(table, requirements, updates)
        key = self._key(table.name())
        etag = self._last_etag.value
        with self._loads_lock:
            known = self._loads.pop(key, None)
            if known is not None and etag and key[1] == "all":
                self._loads[key] = _Loaded(etag, answer.metadata_location, answer.metadata,
                                           known.io, known.config)
        return answer

    def _key(self, identifier: str | Identifier) -> tuple[tuple[str, ...], str]:
        """A load's key: the table and the ``snapshots`` mode its loads ask for."""
        mode = self.properties.get(SNAPSHOT_LOADING_MODE) or "all"
        return self.identifier_to_tuple(identifier), mode

    def _note_etag(self, response: Response, *args: Any, **kwargs: Any) -> None:
        """A ``requests`` response hook: keep the answer's ETag for this thread."""
        self._last_etag.value = response.headers.get("ETag")

    def _remember(self, key: tuple[tuple[str, ...], str], etag: str | None,
                  answer: TableResponse, table: Table) -> None:
        """Keep a load's answer for the next load's ``If-None-Match``, unless per-request."""
        per_request = answer.storage_credentials or any(
            key.startswith(_CREDENTIAL_PREFIXES) for key in answer.config)
        with self._loads_lock:
            if not etag or per_request or answer.metadata_location is None:
                self._loads.pop(key, None)
                return
            self._loads[key] = _Loaded(etag, answer.metadata_location, answer.metadata,
                                       table.io, dict(answer.config))
