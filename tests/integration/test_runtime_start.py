"""A ``Runtime`` that fails part-way through its start leaves no catalog service behind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lakehouse.catalog_client import catalog_answers
from lakehouse.config import parse_config
from lakehouse.runtime import Runtime


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_runtime_failing_after_its_catalog_started_stops_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = parse_config({"warehouse": str(tmp_path / "wh"),
                           "catalog": {"listen": f"127.0.0.1:{_free_port()}"}})

    def no_memory(budget_bytes: int) -> None:
        raise MemoryError(f"no room for a column cache of {budget_bytes} bytes")

    monkeypatch.setattr("lakehouse.runtime.ColumnCache", no_memory)  # fails after the catalog
    with pytest.raises(MemoryError, match="column cache"):
        Runtime(config, serve_catalog=True)
    assert not catalog_answers(config.catalog_uri)
    with socket.socket() as again:  # the port is free for the next start (as uvicorn binds)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind((config.catalog.host, config.catalog.port))
