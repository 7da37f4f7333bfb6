"""The loadTable fast path against a real server: ETag from the catalog row, 304 before the
metadata file is read, cached bodies, and the same answers as the route (the slow path).

A plain ``GET .../tables/{t}`` (``snapshots`` at most) is answered by
``catalog_api.load_table_fastpath``; any other query parameter sends the request through
FastAPI's route, so ``?slow=1`` is the slow path of the same request.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

from catalog_api.core.config import local_path
from tests.conftest_catalog import CatalogServerHandle

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
ROWS = pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=ARROW_SCHEMA)
SLOW = {"slow": "1"}  # an unknown query parameter: the route answers, ignoring it


def _url(server: CatalogServerHandle, namespace: str, name: str) -> str:
    return f"{server.uri}/v1/namespaces/{namespace}/tables/{name}"


def _table_with_history(catalog: RestCatalog, identifier: str) -> None:
    """Three snapshots; ``main`` names the last, tag ``first`` the first, none the second."""
    table = catalog.create_table(identifier, ARROW_SCHEMA)
    for _ in range(3):
        table.append(ROWS)
    table.manage_snapshots().create_tag(table.history()[0].snapshot_id, "first").commit()


def test_fast_and_slow_paths_answer_alike(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    _table_with_history(rest_catalog, f"{catalog_namespace}.t")
    url = _url(catalog_server, catalog_namespace, "t")
    for mode in ({}, {"snapshots": "all"}, {"snapshots": "refs"}):
        fast, slow = httpx.get(url, params=mode), httpx.get(url, params={**mode, **SLOW})
        assert fast.status_code == slow.status_code == 200
        assert fast.headers["ETag"] == slow.headers["ETag"]
        assert fast.headers["content-type"] == slow.headers["content-type"] == "application/json"
        assert fast.content == slow.content  # byte for byte
        for params in (mode, {**mode, **SLOW}):
            tagged = httpx.get(url, params=params, headers={"If-None-Match": fast.headers["ETag"]})
            assert tagged.status_code == 304 and tagged.content == b""
            assert tagged.headers["ETag"] == fast.headers["ETag"]
    full = httpx.get(url).json()["metadata"]
    refs = httpx.get(url, params={"snapshots": "refs"}).json()["metadata"]
    assert len(full["snapshots"]) == 3 and len(refs["snapshots"]) == 2
    assert {s["snapshot-id"] for s in refs["snapshots"]} == {
        ref["snapshot-id"] for ref in full["refs"].values()
    }
    assert httpx.get(url).headers["ETag"] != httpx.get(url, params={"snapshots": "refs"}).headers[
        "ETag"
    ]
    invalid = httpx.get(url, params={"snapshots": "some"})  # validated by the route
    assert invalid.status_code == 400 and invalid.json()["error"]["type"] == "BadRequestException"


def _metadata_file(response: httpx.Response) -> Path:
    return local_path(response.json()["metadata-location"])


def test_304_and_cached_bodies_never_read_the_metadata_file(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA).append(ROWS)
    url = _url(catalog_server, catalog_namespace, "t")
    first = httpx.get(url)
    metadata_file = _metadata_file(first)
    hidden = metadata_file.with_name(metadata_file.name + ".hidden")
    metadata_file.rename(hidden)  # any read of the metadata file now fails
    try:
        etag = {"If-None-Match": first.headers["ETag"]}
        assert httpx.get(url, headers=etag).status_code == 304
        assert httpx.get(url, params=SLOW, headers=etag).status_code == 304  # the route too
        cached = httpx.get(url)
        assert cached.status_code == 200 and cached.content == first.content
        # a body not cached yet is built from the metadata the commit wrote, kept parsed
        refs = httpx.get(url, params={"snapshots": "refs"})
        assert refs.status_code == 200 and refs.json()["metadata-location"] == str(
            first.json()["metadata-location"])
    finally:
        hidden.rename(metadata_file)
    assert httpx.get(url, params={"snapshots": "refs"}).status_code == 200


def test_commit_rename_drop_and_register_invalidate(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    ns = catalog_namespace
    table = rest_catalog.create_table(f"{ns}.t", ARROW_SCHEMA)
    url = _url(catalog_server, ns, "t")
    before = httpx.get(url)
    table.append(ROWS)  # a commit: new metadata file, new ETag, new body
    after = httpx.get(url, headers={"If-None-Match": before.headers["ETag"]})
    assert after.status_code == 200 and after.headers["ETag"] != before.headers["ETag"]
    assert after.json()["metadata-location"] == table.metadata_location
    assert after.json()["metadata"]["current-snapshot-id"] == table.current_snapshot().snapshot_id

    rest_catalog.rename_table(f"{ns}.t", f"{ns}.renamed")
    gone = httpx.get(url, headers={"If-None-Match": after.headers["ETag"]})
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "NoSuchTableException"
    moved = httpx.get(_url(catalog_server, ns, "renamed"))
    assert moved.status_code == 200 and moved.content == after.content  # same metadata file

    # register over an existing name (overwrite) points it at another metadata file
    location = moved.json()["metadata-location"]
    registered = httpx.post(f"{catalog_server.uri}/v1/namespaces/{ns}/register",
                            json={"name": "renamed", "metadata-location": before.json()[
                                "metadata-location"], "overwrite": True})
    assert registered.status_code == 200, registered.text
    reloaded = httpx.get(_url(catalog_server, ns, "renamed"))
    assert reloaded.headers["ETag"] == before.headers["ETag"]
    assert reloaded.json()["metadata-location"] != location

    rest_catalog.drop_table(f"{ns}.renamed")
    dropped = httpx.get(_url(catalog_server, ns, "renamed"),
                        headers={"If-None-Match": reloaded.headers["ETag"]})
    assert dropped.status_code == 404 and dropped.json()["error"]["type"] == "NoSuchTableException"
    rest_catalog.create_table(f"{ns}.renamed", ARROW_SCHEMA)
    recreated = httpx.get(_url(catalog_server, ns, "renamed"))
    assert recreated.headers["ETag"] not in (before.headers["ETag"], after.headers["ETag"])


def test_missing_and_invalid_names_get_the_error_model(catalog_server: CatalogServerHandle) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    for path in (f"{namespace}/tables/t", "%20/tables/t", f"{namespace}%1F%20/tables/t"):
        response = httpx.get(f"{catalog_server.uri}/v1/namespaces/{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["type"] == "NoSuchTableException"
