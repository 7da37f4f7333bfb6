"""`lakehouse serve` and `lakehouse run` on a port another process holds: one line, no traceback.

Each command runs in its own process, as a user runs it. The port is held by a plain
listening socket (a process that is not a catalog), so ``run`` cannot reuse it as the
catalog and must report it. ``run`` checks its ports before it starts Spark.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog_api import CatalogSettings, serve_in_thread
from catalog_api.errors import ListenError

CLI = [sys.executable, "-c", "from lakehouse.cli import app; app()"]
TIMEOUT_S = 120


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port held by a listening socket that never answers."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _config(folder: Path, catalog_port: int) -> Path:
    path = folder / "lakehouse.yaml"
    path.write_text(f"warehouse: ./wh\ncatalog:\n  listen: 127.0.0.1:{catalog_port}\n")
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _lakehouse(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_DEBUG"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env,
                          timeout=TIMEOUT_S, check=False)


def _assert_one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode != 0
    assert done.stdout.strip() == expected, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_serve_reports_the_configured_port_taken(tmp_path: Path, taken_port: int) -> None:
    done = _lakehouse("serve", "-c", str(_config(tmp_path, taken_port)))
    _assert_one_line(
        done, f"error: catalog.listen 127.0.0.1:{taken_port}: address already in use")


def test_serve_reports_the_port_option_taken(tmp_path: Path, taken_port: int) -> None:
    config = _config(tmp_path, _free_port())
    done = _lakehouse("serve", "-c", str(config), "--port", str(taken_port))
    _assert_one_line(
        done, f"error: --host/--port 127.0.0.1:{taken_port}: address already in use")


def test_run_reports_the_metrics_port_taken_before_starting(tmp_path: Path,
                                                            taken_port: int) -> None:
    config = _config(tmp_path, _free_port())
    done = _lakehouse("run", "-c", str(config), "--metrics-listen", f"127.0.0.1:{taken_port}")
    _assert_one_line(
        done, f"error: --metrics-listen 127.0.0.1:{taken_port}: address already in use")
    assert not (tmp_path / "wh").exists()  # neither the catalog nor Spark started


def test_run_reports_the_embedded_catalog_port_taken(tmp_path: Path, taken_port: int) -> None:
    done = _lakehouse("run", "-c", str(_config(tmp_path, taken_port)), "--metrics-listen", "")
    _assert_one_line(
        done, f"error: catalog.listen 127.0.0.1:{taken_port}: address already in use")


def test_serve_in_thread_raises_listen_error(tmp_path: Path, taken_port: int) -> None:
    settings = CatalogSettings(warehouse=str(tmp_path), database_url="sqlite://")
    with pytest.raises(ListenError) as raised:
        serve_in_thread(settings, "127.0.0.1", taken_port)
    assert (raised.value.host, raised.value.port) == ("127.0.0.1", taken_port)
    assert str(raised.value) == f"127.0.0.1:{taken_port}: address already in use"


def test_run_reports_a_catalog_that_does_not_answer(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    config = tmp_path / "lakehouse.yaml"
    config.write_text(f"warehouse: ./wh\ncatalog:\n  embedded: false\n"
                      f"  uri: http://127.0.0.1:{port}/iceberg\n")
    done = _lakehouse("run", "-c", str(config), "--metrics-listen", "")
    assert done.returncode != 0
    assert done.stdout.startswith(f"error: catalog.uri http://127.0.0.1:{port}/iceberg: no "
                                  "Iceberg REST catalog answers"), done.stdout + done.stderr
    assert len(done.stdout.strip().splitlines()) == 1
    assert "Traceback" not in done.stdout + done.stderr
