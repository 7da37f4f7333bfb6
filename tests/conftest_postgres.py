"""Pytest plugin: a real PostgreSQL server on loopback, and catalog servers backed by it.

Loaded by ``tests/conftest.py`` (``pytest_plugins``) or with ``-p tests.conftest_postgres``.
The server is Debian's PostgreSQL (``initdb``/``pg_ctl`` from ``/usr/lib/postgresql/*/bin`` or
the ``PATH``; ``scripts/install-system-deps.sh`` installs the ``postgresql`` package) in a
temporary folder, listening on 127.0.0.1 only, trust authentication, fsync off. PostgreSQL
refuses to run as root, so as root the binaries run through ``runuser`` as the ``postgres``
user the Debian package creates (``nobody`` otherwise). Tests that need it are skipped, with
the reason, only when the binaries are absent.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.conftest_catalog import CatalogServerHandle, running_catalog

PG_USER = "lakehouse"
STARTUP_TIMEOUT_S = 30


def find_postgres_bin() -> Path | None:
    """Folder holding ``initdb`` and ``pg_ctl``: the newest Debian version, else the ``PATH``."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    for folder in versions:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(os.path.realpath(pg_ctl)).parent
    return None


def _os_user() -> str | None:
    """The user that runs PostgreSQL when we are root (None when we are not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("Running as root and neither user 'postgres' nor 'nobody' exists")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A running PostgreSQL server.

    Attributes:
        host: Listen address (127.0.0.1).
        port: TCP port.
        root: Temporary folder with the data directory, socket and log.
    """

    host: str
    port: int
    root: Path

    def url(self, database: str, driver: str = "psycopg") -> str:
        """SQLAlchemy URL of one database, e.g. ``postgresql+psycopg://lakehouse@...``."""
        return f"postgresql+{driver}://{PG_USER}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create a database (name: lowercase letters, digits, _) and return its URL."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"Unsafe database name: {name!r}")
        conninfo = f"host={self.host} port={self.port} user={PG_USER} dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _run(command: list[str], os_user: str | None) -> None:
    prefix = ["runuser", "-u", os_user, "--"] if os_user else []
    result = subprocess.run(
        [*prefix, *command], capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S
    )
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({result.returncode}): {result.stderr[-2000:]}")


def _start(bin_dir: Path, root: Path, os_user: str | None) -> PostgresServer:
    data = root / "data"
    _run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        os_user,
    )
    port = _free_port()
    options = f"-h 127.0.0.1 -p {port} -k {root} -F -c max_connections=200"
    _run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "log"),
            "-w",
            "-t",
            str(STARTUP_TIMEOUT_S),
            "start",
        ],
        os_user,
    )
    return PostgresServer("127.0.0.1", port, root)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Start a PostgreSQL server on 127.0.0.1 for the whole session."""
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin "
            "or PATH: run scripts/install-system-deps.sh (Debian package 'postgresql')"
        )
    os_user = _os_user()
    root = Path(tempfile.mkdtemp(prefix="lakehouse-pg-"))
    if os_user:
        shutil.chown(root, user=os_user)
    try:
        server = _start(bin_dir, root, os_user)
        try:
            yield server
        finally:
            _run(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(root / "data"),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                os_user,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_catalog_server(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogServerHandle]:
    """The catalog service for the whole session, its store in a PostgreSQL database."""
    database_url = postgres_server.create_database("catalog")
    with running_catalog(tmp_path_factory.mktemp("pg_catalog"), database_url) as handle:
        yield handle


@pytest.fixture(params=["sqlite", "postgres"])
def backend_catalog_server(request: pytest.FixtureRequest) -> CatalogServerHandle:
    """The session's catalog server on each store backend in turn: SQLite, then PostgreSQL."""
    name = "catalog_server" if request.param == "sqlite" else "postgres_catalog_server"
    handle: CatalogServerHandle = request.getfixturevalue(name)
    return handle
