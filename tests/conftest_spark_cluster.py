"""Pytest plugin: a Spark standalone cluster (a master and two workers) on S3 (moto).

Loaded by ``tests/conftest.py`` (``pytest_plugins``) or with ``-p tests.conftest_spark_cluster``.
The master and each worker are their own JVM, started with ``bin/spark-class`` of the pyspark
install (``SPARK_HOME`` is pyspark's folder): the master on 127.0.0.1 and each worker on its
own loopback address (:func:`worker_host`), with free ports, each in its own folder under the
session's temporary root (``SPARK_WORKER_DIR``, ``SPARK_LOCAL_DIRS``, its log). A worker offers
1 core and 1 GiB; its executors run this interpreter (``PYSPARK_PYTHON``).

The workers cannot read the driver's local files. Each starts in its own mount and PID
namespaces (``unshare --mount --propagation private --pid``) in which the system's temporary
folder and the session's temporary root are covered by an empty tmpfs, with only the worker's
own folder bound back into place: a task that opens a driver-local path there (a ``file:``
warehouse, a scratch file of the driver) fails with "file not found" instead of reading the
driver's copy. The venv, the pyspark install and the jar cache stay visible (executors need
them). The daemons, and so the executors, have the S3 server's credentials in the standard
AWS variables, as a cluster node has its own.

The warehouse is an ``s3://`` bucket on a moto server (its own process); the catalog is the
project's REST catalog on that warehouse; the session (:func:`cluster_spark`) reads and writes
S3 from the executors: Iceberg through S3FileIO, Delta through S3A (:func:`s3_conf`).

Only one SparkContext can run in a process, and the session fixture ``spark`` of
``tests/conftest.py`` is a local one: the tests that use :func:`spark_cluster` run last
(:func:`pytest_collection_modifyitems`), and :func:`cluster_spark` stops a local session first.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import pyspark
import pytest
from pyspark.sql import SparkSession

from catalog_api import CatalogSettings, serve_in_thread
from catalog_api.core.config import S3Settings
from lakehouse.spark.jars import default_cache_dir
from lakehouse.spark.session import build_spark_session
from tests.benchmarks.common import free_port
from tests.conftest_catalog import CatalogServerHandle, on_s3
from tests.moto_process import moto_process

SPARK_HOME = Path(pyspark.__file__).parent
REPO_ROOT = Path(__file__).resolve().parents[1]
MASTER_HOST = "127.0.0.1"
WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "768m"
DAEMON_MEMORY = "256m"  # heap of the master and worker JVMs themselves
HIDDEN_TMPFS_SIZE = "256m"
START_TIMEOUT_S = 90
LOG_TAIL_LINES = 40
BUCKET, REGION = "lake", "us-east-1"
ACCESS_KEY, SECRET_KEY = "cluster-tests", "cluster-tests-secret"  # moto accepts any key
CATALOG = "lakehouse"

_HANDLE = pytest.StashKey["SparkClusterHandle"]()


class SparkClusterError(RuntimeError):
    """The cluster cannot start here (no ``unshare`` or no right to mount)."""


@dataclass
class SparkDaemon:
    """One JVM of the cluster: the master or a worker.

    Attributes:
        name: ``master``, ``worker-1``, ...
        process: Its process (``spark-class`` execs the JVM).
        folder: Its own working folder (work and local dirs, log).
        log: Its stdout and stderr.
    """

    name: str
    process: subprocess.Popen[bytes]
    folder: Path
    log: Path

    def stop(self) -> None:
        """Stop the JVM and what it started (executors), by its process group."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.process, signal.SIGKILL)  # executors the worker left behind
        self.process.wait()


def _signal_group(process: subprocess.Popen[bytes], number: signal.Signals) -> None:
    try:
        os.killpg(process.pid, number)  # its own group: start_new_session
    except ProcessLookupError:
        pass


@dataclass
class SparkClusterHandle:
    """The session's standalone cluster.

    Attributes:
        master_url: ``spark://127.0.0.1:PORT``, for ``build_spark_session(master=...)``.
        webui_port: The master's web UI port (its JSON status at ``/json/``).
        root: The cluster's folder (one subfolder per JVM).
        hidden: The driver-local folders the workers cannot see.
        master: The master's JVM.
        workers: The workers' JVMs.
    """

    master_url: str
    webui_port: int
    root: Path
    hidden: tuple[Path, ...]
    master: SparkDaemon
    workers: list[SparkDaemon] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        """The master's JSON status (``{}`` while it does not answer)."""
        try:
            answer = httpx.get(f"http://{MASTER_HOST}:{self.webui_port}/json/", timeout=2)
            return dict(answer.json())
        except (httpx.HTTPError, ValueError, TypeError):
            return {}

    def alive_workers(self) -> list[dict[str, Any]]:
        """The workers the master lists as ``ALIVE``."""
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def wait(self) -> None:
        """Wait until the master lists every worker as ALIVE; fail with the logs otherwise."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(self.alive_workers()) < len(self.workers):
            for daemon in (self.master, *self.workers):
                if daemon.process.poll() is not None:
                    pytest.fail(f"Spark {daemon.name} exited with code "
                                f"{daemon.process.returncode} while starting\n{self.log_tails()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the Spark master did not list {len(self.workers)} ALIVE workers "
                            f"within {START_TIMEOUT_S} s: {self.status()}\n{self.log_tails()}")
            time.sleep(0.5)

    def log_tails(self) -> str:
        """The last lines of every daemon's log and of every executor's stderr."""
        logs = [d.log for d in (self.master, *self.workers)]
        logs += sorted(self.root.glob("worker-*/work/app-*/*/stderr"))
        return "\n".join(f"--- {log}\n{_tail(log)}" for log in logs)

    def stop(self) -> None:
        """Stop the workers, then the master."""
        for daemon in (*self.workers, self.master):
            daemon.stop()


def _tail(log: Path) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
    except OSError:
        return "(no log)"


def installed_folders() -> tuple[Path, ...]:
    """What every machine of a cluster has installed, which the workers must still see.

    The venv (its Python and packages, pyspark among them), the project's checkout (installed
    in the venv in editable mode) and the Spark jar cache.
    """
    return tuple(path.resolve() for path in (Path(sys.prefix), SPARK_HOME, REPO_ROOT,
                                             default_cache_dir()))


def hidden_folders(basetemp: Path) -> tuple[Path, ...]:
    """The driver-local folders to hide from the workers: the temp folder and pytest's root.

    A folder inside another one of the list is left out (covering the outer one hides it),
    and so is a folder holding something installed (:func:`installed_folders`: a checkout
    under the temp folder, as a CI clone may be); pytest's root, where every test keeps its
    driver-local files, is always hidden.
    """
    folders = sorted({Path(tempfile.gettempdir()).resolve(), basetemp.resolve()},
                     key=lambda p: len(p.parts))
    installed = installed_folders()
    kept: list[Path] = []
    for folder in folders:
        holds_installed = any(path.is_relative_to(folder) for path in installed)
        if folder == basetemp.resolve() or not holds_installed:
            if not any(folder.is_relative_to(outer) for outer in kept):
                kept.append(folder)
    return tuple(kept)


def isolated_command(folder: Path, hidden: Sequence[Path], command: Sequence[str]) -> list[str]:
    """``command`` run in new mount and PID namespaces that hide ``hidden`` but for ``folder``.

    Each hidden folder is covered by an empty tmpfs; ``folder`` (started from as the working
    directory, so that ``.`` still names the original after the cover) is bound back at its
    path. ``--no-canonicalize`` keeps ``mount`` from turning ``.`` into the covered path. The
    PID namespace, with its own ``/proc``, closes the way around the cover through
    ``/proc/<driver pid>/root``; the command is its first process, so the executors it starts
    end with it.
    """
    steps = [f"mount -t tmpfs -o size={HIDDEN_TMPFS_SIZE},mode=1777 driver-hidden "
             f"{shlex.quote(str(path))}" for path in hidden]
    target = shlex.quote(str(folder))
    steps += [f"mkdir -p {target}", f"mount --no-canonicalize --bind . {target}",
              f"cd {target}", "exec " + shlex.join(command)]
    return ["unshare", "--mount", "--propagation", "private", "--pid", "--mount-proc",
            "--kill-child=SIGTERM", "sh", "-ec", " && ".join(steps)]


def _daemon_env(folder: Path, host: str) -> dict[str, str]:
    """The environment of a daemon, which its executors inherit.

    It holds the moto server's credentials in the standard AWS variables, as a cluster node
    holds its own (or has an instance role): an application that does not pass keys in its
    configuration, as the pipeline does not, reaches S3 through the AWS credential chain.
    """
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": host, "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
           "SPARK_WORKER_DIR": str(folder / "work"), "SPARK_LOCAL_DIRS": str(folder / "local"),
           "SPARK_LOG_DIR": str(folder), "SPARK_NO_DAEMONIZE": "1",
           "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    env.pop("SPARK_CONF_DIR", None)
    env.pop("AWS_SESSION_TOKEN", None)
    env.pop("AWS_PROFILE", None)
    return env


def _launch(name: str, folder: Path, host: str, command: list[str]) -> SparkDaemon:
    """Start one JVM on ``host`` in ``folder`` (own process group), its log ``<name>.log``."""
    for sub in ("work", "local"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    log = folder / f"{name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=folder, env=_daemon_env(folder, host),
                                   stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    return SparkDaemon(name, process, folder, log)


def _spark_class(main: str, *args: str) -> list[str]:
    return [str(SPARK_HOME / "bin" / "spark-class"), f"org.apache.spark.deploy.{main}", *args]


def worker_host(number: int) -> str:
    """The loopback address of worker ``number`` (from 1): ``127.0.0.<number + 1>``.

    Each worker, and so its executors, is its own host to Spark. On one shared address an
    executor would read the shuffle files of the other worker's executors from the disk
    (``spark.shuffle.readHostLocalDisk``), which the isolation hides; separate machines fetch
    them over the network, and so do these.
    """
    return f"127.0.0.{number + 1}"


def start_cluster(root: Path, hidden: Sequence[Path], workers: int = WORKERS,
                  cores: int = WORKER_CORES, memory: str = WORKER_MEMORY) -> SparkClusterHandle:
    """Start a master and ``workers`` isolated workers under ``root``; wait for them.

    Args:
        root: The cluster's folder.
        hidden: The folders the workers must not see (none: they see the driver's files).
        workers: How many workers.
        cores: Cores each worker offers.
        memory: Memory each worker offers its executors (``1g``, ``8g``).

    Raises:
        SparkClusterError: ``unshare`` is missing.
    """
    if shutil.which("unshare") is None:
        raise SparkClusterError("the cluster's workers need `unshare` (util-linux)")
    port, webui = free_port(), free_port()
    master = _launch("master", root / "master", MASTER_HOST, _spark_class(
        "master.Master", "--host", MASTER_HOST, "--port", str(port), "--webui-port", str(webui)))
    handle = SparkClusterHandle(f"spark://{MASTER_HOST}:{port}", webui, root, tuple(hidden), master)
    try:
        for number in range(1, workers + 1):
            folder, host = root / f"worker-{number}", worker_host(number)
            worker = _spark_class(
                "worker.Worker", "--host", host, "--webui-port", "0",
                "--cores", str(cores), "--memory", memory,
                "--work-dir", str(folder / "work"), handle.master_url)
            folder.mkdir(parents=True)
            handle.workers.append(_launch(folder.name, folder, host,
                                          isolated_command(folder, hidden, worker)))
        handle.wait()
    except BaseException:
        handle.stop()
        raise
    return handle


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[SparkClusterHandle]:
    """A Spark standalone master and two isolated workers on loopback, for the session."""
    root = tmp_path_factory.mktemp("spark-cluster")
    hidden = hidden_folders(tmp_path_factory.getbasetemp())
    try:
        handle = start_cluster(root, hidden)
    except SparkClusterError as error:
        pytest.fail(str(error))
    request.config.stash[_HANDLE] = handle
    try:
        yield handle
    finally:
        handle.stop()


# ------------------------------------------------------------------ S3, catalog, session


@dataclass(frozen=True)
class S3Handle:
    """The moto S3 server of the cluster tests and its bucket.

    Attributes:
        endpoint: ``http://127.0.0.1:PORT``.
        bucket: The warehouse bucket.
    """

    endpoint: str
    bucket: str

    def client(self) -> Any:
        """A boto3 S3 client on the server."""
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


@pytest.fixture(scope="session")
def cluster_s3() -> Iterator[S3Handle]:
    """A moto S3 server (own process) with the bucket :data:`BUCKET`."""
    with moto_process() as endpoint:
        handle = S3Handle(endpoint, BUCKET)
        handle.client().create_bucket(Bucket=BUCKET)
        yield handle


@pytest.fixture(scope="session")
def cluster_catalog(cluster_s3: S3Handle, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[CatalogServerHandle]:
    """The REST catalog on 127.0.0.1 whose warehouse is ``s3://lake/wh`` (no vending)."""
    root = tmp_path_factory.mktemp("cluster-catalog")
    database_url = f"sqlite:///{root / 'catalog.db'}"
    s3 = S3Settings(endpoint=cluster_s3.endpoint, region=REGION, access_key_id=ACCESS_KEY,
                    secret_access_key=SECRET_KEY, vend_credentials=False, remote_signing=False)
    settings = on_s3(CatalogSettings(warehouse=root.as_uri(), database_url=database_url),
                     f"s3://{cluster_s3.bucket}/wh", s3)
    running = serve_in_thread(settings, host="127.0.0.1", port=0)
    try:
        yield CatalogServerHandle(running.uri, root, database_url, settings, running)
    finally:
        running.stop()


def s3_conf(endpoint: str, catalog_name: str = CATALOG) -> dict[str, str]:
    """The Spark settings that make the driver and the executors use the moto S3.

    S3A (``s3a://``, Delta) through ``spark.hadoop.fs.s3a.*``, and the Iceberg catalog's
    S3FileIO (which the REST catalog's default FileIO picks for ``s3://``) through its catalog
    properties. The keys travel in the configuration to the executors: they need nothing in
    their environment. Each of these settings is needed (without a region S3FileIO looks for
    one), but ``fs.s3a.endpoint.region``, which spares S3A a region lookup.
    """
    catalog, hadoop = f"spark.sql.catalog.{catalog_name}", "spark.hadoop.fs.s3a"
    return {
        f"{hadoop}.endpoint": endpoint,
        f"{hadoop}.endpoint.region": REGION,
        f"{hadoop}.path.style.access": "true",
        f"{hadoop}.access.key": ACCESS_KEY,
        f"{hadoop}.secret.key": SECRET_KEY,
        f"{catalog}.s3.endpoint": endpoint,
        f"{catalog}.s3.path-style-access": "true",
        f"{catalog}.s3.access-key-id": ACCESS_KEY,
        f"{catalog}.s3.secret-access-key": SECRET_KEY,
        f"{catalog}.client.region": REGION,
    }


def cluster_conf() -> dict[str, str]:
    """The settings of an application on the test cluster: loopback, one core per executor.

    Two cores in all: two partitions by default, and two for Delta's log replay (its default,
    50 tasks per snapshot, takes most of a small table's time).
    """
    cores = str(WORKERS * WORKER_CORES)
    return {
        "spark.driver.host": MASTER_HOST,
        "spark.driver.bindAddress": MASTER_HOST,
        "spark.driver.memory": "1g",
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": str(WORKER_CORES),
        "spark.task.maxFailures": "2",
        "spark.default.parallelism": cores,
        "spark.sql.shuffle.partitions": cores,
        "spark.databricks.delta.snapshotPartitions": cores,
    }


def free_cluster(handle: SparkClusterHandle) -> None:
    """Make way for an application started by another process (the pipeline's CLI).

    This process's local session is stopped (its memory is needed), and no application may
    be running on the cluster: a standalone application takes every free core, so one left
    running (:func:`cluster_spark`'s) would leave the next with no executor, waiting.
    """
    _stop_other_session(handle.master_url)
    running = [app.get("name") for app in handle.status().get("activeapps", [])]
    assert not running, f"applications still run on the cluster: {running}"


def _stop_other_session(master_url: str) -> None:
    """Stop the process's SparkContext unless it is on ``master_url`` (one per process)."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None and active.master != master_url:
        session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        (session or active).stop()


def _wait_for_executors(spark: SparkSession, handle: SparkClusterHandle) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    while status.size() < len(handle.workers) + 1:  # the driver's block manager counts too
        if time.monotonic() > deadline:
            pytest.fail(f"{len(handle.workers)} executors did not register within "
                        f"{START_TIMEOUT_S} s\n{handle.log_tails()}")
        time.sleep(0.5)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()


@pytest.fixture(scope="session")
def cluster_spark(spark_cluster: SparkClusterHandle, cluster_s3: S3Handle,
                  cluster_catalog: CatalogServerHandle) -> Iterator[SparkSession]:
    """A session on the cluster whose default catalog ``lakehouse`` is the S3 catalog.

    It waits until one executor per worker has registered; it is stopped at the end.
    """
    _stop_other_session(spark_cluster.master_url)
    spark = build_spark_session(
        app_name="lakehouse-cluster-tests", master=spark_cluster.master_url,
        catalog_name=CATALOG, catalog_uri=cluster_catalog.uri,
        warehouse=cluster_catalog.settings.warehouse,
        extra_conf={**cluster_conf(), **s3_conf(cluster_s3.endpoint)})
    try:
        assert spark.sparkContext.master == spark_cluster.master_url, (
            "a Spark session on another master is still running in this process")
        _wait_for_executors(spark, spark_cluster)
        yield spark
    finally:
        spark.stop()


# ------------------------------------------------------------------ hooks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests on the cluster last: their session replaces the local one.

    Those with this process's session on the cluster (:func:`cluster_spark`, which holds
    every core of it until the end) come after those whose applications run in processes
    of their own.
    """
    def on_cluster(item: pytest.Item) -> tuple[bool, bool]:
        names = getattr(item, "fixturenames", ())
        return "spark_cluster" in names, "cluster_spark" in names
    items.sort(key=on_cluster)  # stable: the order within each group is kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Add the tails of the cluster's logs to the report of a failed test on the cluster."""
    report = yield
    handle = item.config.stash.get(_HANDLE, None)
    if report.failed and handle is not None and "spark_cluster" in getattr(
            item, "fixturenames", ()):
        report.sections.append(("Spark cluster logs", handle.log_tails()))
    return report
