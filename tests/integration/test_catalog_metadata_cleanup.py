"""The service deletes the metadata files a commit drops from a table's log, when asked.

A real catalog server on loopback; the client is the pipeline's (it leaves the deleting to
the server), so every file removed here was removed by the service.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pytest

from lakehouse.rest_catalog import ConditionalRestCatalog
from tests.conftest_catalog import CatalogServerHandle

SCHEMA = pa.schema([pa.field("id", pa.int64())])
KEPT_LOG = 2
"""``write.metadata.previous-versions-max`` of the tables here."""


def _metadata_files(location: str) -> set[str]:
    folder = Path(urlparse(location).path) / "metadata"
    return {path.name for path in folder.glob("*.metadata.json")}


@pytest.mark.parametrize("delete_after_commit", [True, False])
def test_metadata_files_out_of_the_log_are_deleted_only_when_the_table_asks(
    catalog_server: CatalogServerHandle, catalog_namespace: str, delete_after_commit: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = ConditionalRestCatalog("cleanup", uri=catalog_server.uri)
    properties = {"write.metadata.previous-versions-max": str(KEPT_LOG),
                  "write.metadata.delete-after-commit.enabled": str(delete_after_commit).lower()}
    table = client.create_table(f"{catalog_namespace}.t", SCHEMA, properties=properties)
    commits = 5
    with caplog.at_level(logging.WARNING):
        for row in range(commits):
            table.append(pa.table({"id": [row]}, schema=SCHEMA))
    table = client.load_table(f"{catalog_namespace}.t")
    logged = {Path(entry.metadata_file).name for entry in table.metadata.metadata_log}
    current = Path(table.metadata_location).name
    files = _metadata_files(table.metadata.location)
    assert len(logged) == KEPT_LOG
    if delete_after_commit:
        assert files == logged | {current}
    else:
        assert len(files) == commits + 1 and files >= logged | {current}
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range(commits))
    assert not [r for r in caplog.records if "delete" in r.getMessage().lower()]


def test_a_log_naming_other_files_never_gets_them_deleted(
    catalog_server: CatalogServerHandle, catalog_namespace: str,
) -> None:
    """A registered metadata file's log is the client's: only metadata files are deleted."""
    client = ConditionalRestCatalog("cleanup", uri=catalog_server.uri)
    identifier = f"{catalog_namespace}.crafted"
    table = client.create_table(identifier, SCHEMA, properties={
        "write.metadata.previous-versions-max": "1",
        "write.metadata.delete-after-commit.enabled": "true"})
    table.append(pa.table({"id": [1]}, schema=SCHEMA))
    table = client.load_table(identifier)
    data_file = next(iter(table.scan().plan_files())).file.file_path
    metadata = json.loads(Path(urlparse(table.metadata_location).path).read_text())
    metadata["metadata-log"] = [{"metadata-file": data_file, "timestamp-ms": 1}]
    crafted = Path(urlparse(table.metadata.location).path) / "metadata" / "crafted.metadata.json"
    crafted.write_text(json.dumps(metadata))
    client.drop_table(identifier)  # not purged: the files stay
    table = client.register_table(identifier, crafted.as_uri())
    table.append(pa.table({"id": [2]}, schema=SCHEMA))  # drops the data file from the log
    assert Path(urlparse(data_file).path).exists()
    rows = client.load_table(identifier).scan().to_arrow()["id"].to_pylist()
    assert sorted(rows) == [1, 2]
