"""ETags of table metadata and ``If-None-Match`` handling (spec 1.11.0, ``loadTable``).

An ETag names one version of a table's metadata in one representation: the metadata file
location (a new file for every commit) plus the ``snapshots`` mode of the response (``all``
and ``refs`` give different bodies, so they get distinct tags, as the spec asks). Create and
commit responses carry the full metadata, i.e. the ``all`` representation.
"""

from __future__ import annotations

import hashlib

from fastapi import Response

ETAG_HEADER = "ETag"


def table_etag(metadata_location: str, snapshots: str = "all") -> str:
    """Return the strong ETag (quoted) of a table metadata representation.

    Args:
        metadata_location: The metadata file the response is read from.
        snapshots: ``all`` or ``refs``, the snapshot selection of the response.
    """
    digest = hashlib.sha256(f"{metadata_location}\n{snapshots}".encode()).hexdigest()
    return f'"{digest[:40]}"'


def matches_if_none_match(header: str | None, etag: str) -> bool:
    """Tell whether an ``If-None-Match`` header names ``etag`` (RFC 9110, weak comparison).

    Args:
        header: The header value: ``*`` or a comma-separated list of entity tags.
        etag: The current ETag, quoted.
    """
    if not header:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in tags or etag in tags


def not_modified(etag: str) -> Response:
    """Build the bodiless 304 answer for a matching ``If-None-Match``."""
    return Response(status_code=304, headers={ETAG_HEADER: etag})
