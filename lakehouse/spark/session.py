"""Build a local or cluster Spark session wired to one Iceberg catalog."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from catalog_api.core.config import S3Settings
from lakehouse.catalog_client import oauth_properties
from lakehouse.config import DEFAULT_SPARK_NICENESS
from lakehouse.spark.jars import spark_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "DELTA_EXTENSIONS",
    "ICEBERG_EXTENSIONS",
    "build_spark_session",
    "iceberg_session_conf",
    "launched_by_spark_submit",
    "s3_session_conf",
]

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DELTA_EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG_CLASS = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
ICEBERG_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
DEFAULT_MASTER = "local[2]"
"""The master of a session started from plain Python when none is given."""
log = logging.getLogger(__name__)
# Small-machine defaults; any of them can be overridden through ``extra_conf``.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Delta reconstructs a table's state from its log in 50 partitions by default: 50 tasks
    # for a view table's few files, twice per MERGE. A keyed 8-row MERGE took 2.4 s, 1.1 s
    # with 1 to 8 partitions (local[2]). Sources with large logs may want more.
    "spark.databricks.delta.snapshotPartitions": "4",
    # Ticks of several views run at once (``workers``), each in a pool of its own
    # (lakehouse.runtime): FAIR shares the executors between the pools, so a small tick's
    # tasks do not queue behind every task of a full refresh's stage, as they do in FIFO.
    "spark.scheduler.mode": "FAIR",
    # Spark keeps the classes it generates for a query in an LRU cache of 100 by default.
    # One incremental tick of a TPC-H view runs 150-170 distinct generated classes, the
    # same every tick: the cache thrashed, and every tick compiled them all again with
    # Janino (about 20 ms each, a quarter of the JVM's CPU). With room for them a tick
    # compiles 0-10 (SF 0.1, local[2]: Q1 10.5 s -> 7.2 s, Q3 10.0 s -> 7.4 s, median).
    # A class stays loaded whether cached or not, so metaspace did not grow any faster.
    "spark.sql.codegen.cache.maxEntries": "4000",
}
_EMPTY: Mapping[str, str] = {}
REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|credential"
"""Spark's default ``spark.redaction.regex`` plus ``credential`` (the REST client's secret)."""


def iceberg_session_conf(
    *,
    catalog_name: str,
    catalog_uri: str,
    warehouse: str,
    catalog_type: str = "rest",
    jars: Sequence[Path] = (),
    jars_packages: str | None = None,
    catalog_credential: str | None = None,
) -> dict[str, str]:
    """Return the Spark configuration for one Iceberg catalog and Delta (no small-machine defaults).

    Both session extensions are installed (Iceberg's procedures and ``MERGE``; Delta's SQL and
    ``DeltaTable``) and ``spark_catalog`` is Delta's, so ``delta.`<path>``` tables resolve
    while the Iceberg catalog stays the default one.

    Args:
        catalog_name: The Spark catalog name, also made the default catalog.
        catalog_uri: The catalog URI (REST base URI such as ``http://host:8181/iceberg``);
            ignored for ``hadoop`` catalogs.
        warehouse: The warehouse location (a path or URI).
        catalog_type: ``rest`` (default), ``hadoop`` or ``jdbc``.
        jars: Jars for ``spark.jars``.
        jars_packages: Maven coordinates for ``spark.jars.packages``, used instead of ``jars``.
        catalog_credential: ``client_id:secret`` the REST client authenticates with (OAuth2
            client credentials); its key is added to ``spark.redaction.regex``, so the UI and
            logs hide it.

    Returns:
        Configuration keys and values.
    """
    prefix = f"spark.sql.catalog.{catalog_name}"
    conf = {
        "spark.sql.extensions": f"{ICEBERG_EXTENSIONS},{DELTA_EXTENSIONS}",
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG_CLASS,
        prefix: ICEBERG_CATALOG_CLASS,
        f"{prefix}.type": catalog_type,
        f"{prefix}.warehouse": warehouse,
        # Other writers commit to the sources; a cached table would hide their snapshots.
        f"{prefix}.cache-enabled": "false",
        "spark.sql.defaultCatalog": catalog_name,
    }
    if catalog_type != "hadoop":
        conf[f"{prefix}.uri"] = catalog_uri
        for key, value in oauth_properties(catalog_uri, catalog_credential).items():
            conf[f"{prefix}.{key}"] = value
        if catalog_credential is not None:
            conf["spark.redaction.regex"] = REDACTION_REGEX
    if jars_packages:
        conf["spark.jars.packages"] = jars_packages
    elif jars:
        conf["spark.jars"] = ",".join(str(Path(jar).resolve()) for jar in jars)
    return conf


S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
AWS_CREDENTIALS_CHAIN = "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"
"""Environment variables, Java system properties, web identity, ``AWS_PROFILE``'s profile,
then the container's or instance's role (S3A's default chain has no profile)."""


def s3_session_conf(catalog_name: str, s3: S3Settings) -> dict[str, str]:
    """Return the Spark configuration that reaches an S3 warehouse.

    Iceberg tables (``s3://`` locations) go through Iceberg's S3FileIO, set up by the
    catalog's ``s3.endpoint``, ``s3.path-style-access`` and ``client.region``. Everything
    else (Delta tables, the scratch Parquet files) goes through Hadoop's S3A, which also
    serves the ``s3`` scheme (``fs.s3.impl``): a Delta table keeps one URI, ``s3://...``,
    for Spark, delta-rs, DuckDB and the catalog, rather than an ``s3a://`` alias for Spark
    alone. No ``AbstractFileSystem`` is mapped to ``s3``: Hadoop's ``S3A`` one accepts only
    the ``s3a`` scheme and fails on an ``s3://`` path, where Spark's ``FileContext`` users
    (Delta's checksum files) fall back to the ``FileSystem`` API when none is configured.
    Credentials come from the standard AWS chain on the driver and on each executor
    (:data:`AWS_CREDENTIALS_CHAIN`; the AWS SDK v2's default chain for S3FileIO).

    Args:
        catalog_name: The Spark catalog name of the Iceberg catalog.
        s3: The storage, as :func:`lakehouse.storage.storage_s3` resolves it.

    Returns:
        Configuration keys and values (no credential among them).
    """
    hadoop, catalog = "spark.hadoop.fs.s3a", f"spark.sql.catalog.{catalog_name}"
    path_style = str(s3.path_style).lower()
    conf = {
        "spark.hadoop.fs.s3.impl": S3A_FILESYSTEM,
        f"{hadoop}.aws.credentials.provider": AWS_CREDENTIALS_CHAIN,
        f"{hadoop}.endpoint.region": s3.region,
        f"{hadoop}.path.style.access": path_style,
        f"{catalog}.client.region": s3.region,
        f"{catalog}.s3.path-style-access": path_style,
    }
    if s3.endpoint:
        conf[f"{hadoop}.endpoint"] = s3.endpoint
        conf[f"{hadoop}.connection.ssl.enabled"] = str(
            not s3.endpoint.startswith("http://")).lower()
        conf[f"{catalog}.s3.endpoint"] = s3.endpoint
    return conf


def launched_by_spark_submit() -> bool:
    """Whether this Python process runs under ``spark-submit`` (its JVM is already started).

    ``spark-submit`` starts the driver's JVM with its ``--master``, ``--jars``,
    ``--packages``, ``--driver-memory`` and ``--conf`` settings, then this process, which
    finds the JVM through ``PYSPARK_GATEWAY_PORT``. The JVM's classpath and memory are fixed
    by then: jars and driver memory set on the session builder no longer reach the driver.
    """
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def _submitted_conf() -> dict[str, str] | None:
    """The settings ``spark-submit`` started the driver's JVM with; None without it."""
    if not launched_by_spark_submit():
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    return dict(SparkConf().getAll())


def build_spark_session(
    *,
    app_name: str,
    master: str | None = None,
    catalog_name: str,
    catalog_uri: str,
    warehouse: str,
    catalog_type: str = "rest",
    extra_conf: Mapping[str, str] = _EMPTY,
    jars: Sequence[Path] | None = None,
    jars_packages: str | None = None,
    catalog_credential: str | None = None,
    s3: S3Settings | None = None,
    niceness: int = DEFAULT_SPARK_NICENESS,
) -> SparkSession:
    """Start (or reuse) a Spark session with Iceberg, Delta and one Iceberg catalog as default.

    Jars default to :func:`lakehouse.spark.jars.spark_jars` (resolved with Maven once) unless
    ``jars_packages`` names Maven coordinates. Workers run this interpreter
    (``PYSPARK_PYTHON``), so they see the same pyarrow. Jars, extensions and driver memory only
    apply to the first session of a process; catalog settings apply to a reused one too.

    Under ``spark-submit`` (:func:`launched_by_spark_submit`) what it was given stands
    unless set here: no ``master`` keeps its ``--master``; the default jars are not resolved
    (its ``--jars`` or ``--packages`` put them on the driver's classpath, which jars set here
    cannot reach any more); its ``--driver-memory`` and ``--conf`` values beat
    :data:`DEFAULT_CONF` (``extra_conf`` still beats them).

    Args:
        app_name: The Spark application name.
        master: The Spark master URL; None: ``spark-submit``'s ``--master``, else
            :data:`DEFAULT_MASTER`.
        catalog_name: The Spark catalog name, made ``spark.sql.defaultCatalog``.
        catalog_uri: The catalog URI (REST base URI, e.g. ``http://127.0.0.1:8181/iceberg``).
        warehouse: The warehouse location.
        catalog_type: ``rest`` (default), ``hadoop`` or ``jdbc``.
        extra_conf: More Spark settings; they override the defaults (``spark.driver.memory``
            is ``2g`` unless set here).
        jars: Jars for ``spark.jars``; default: :func:`lakehouse.spark.jars.spark_jars`.
        jars_packages: Maven coordinates for ``spark.jars.packages``, used instead of jars.
        catalog_credential: ``client_id:secret`` of the pipeline's principal at the catalog.
        s3: The S3 storage of the warehouse or sources, if any (:func:`s3_session_conf`).
        niceness: With a ``local`` master, how much lower the JVM's CPU priority is than
            this process's (:data:`lakehouse.config.DEFAULT_SPARK_NICENESS`;
            Linux only, 0 to 19). Applies only
            when this call starts the JVM.

    Returns:
        The session, with log level WARN.

    Raises:
        lakehouse.errors.SparkClasspathError: If the jars cannot be resolved.
    """
    from pyspark.sql import SparkSession

    submitted = _submitted_conf()
    if jars is None and not jars_packages and submitted is None:
        jars = spark_jars()
    conf = {
        **{k: v for k, v in DEFAULT_CONF.items() if submitted is None or k not in submitted},
        **iceberg_session_conf(
            catalog_name=catalog_name,
            catalog_uri=catalog_uri,
            warehouse=warehouse,
            catalog_type=catalog_type,
            jars=jars or (),
            jars_packages=jars_packages,
            catalog_credential=catalog_credential,
        ),
        **(s3_session_conf(catalog_name, s3) if s3 is not None else {}),
        **extra_conf,
    }
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or submitted is None:
        builder = builder.master(master or DEFAULT_MASTER)
    for key, value in conf.items():
        builder = builder.config(key, value)
    effective_master = conf.get("spark.master",  # extra_conf's wins, as in the builder
                                master or (DEFAULT_MASTER if submitted is None else None))
    if niceness and effective_master is not None and effective_master.startswith("local"):
        _launch_jvm({**conf, "spark.master": effective_master}, niceness)
    spark = builder.getOrCreate()  # a reused session takes the runtime (catalog) settings only
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _launch_jvm(conf: Mapping[str, str], niceness: int) -> None:
    """Start the driver's JVM at ``niceness`` below this process's priority (Linux).

    On Linux a nice value belongs to a thread, and a process started by a thread starts
    with that thread's: a short-lived thread lowers its own priority, then starts the JVM
    (``spark-submit`` with ``conf``, as ``SparkSession.builder.getOrCreate`` would), whose
    threads all inherit it. The calling thread's priority is unchanged; py4j's finalizer
    thread, started with the gateway, keeps the lowered one (it only releases Java
    objects). Nothing happens when a JVM already runs (under ``spark-submit`` too);
    elsewhere than Linux the JVM starts later at this process's priority.

    Raises:
        pyspark.errors.PySparkRuntimeError: The JVM did not start.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:  # noqa: SLF001 - already started: nothing to do
        return
    if sys.platform != "linux":
        log.debug("the Spark JVM runs at this process's CPU priority: lowering it "
                  "(spark.niceness) needs Linux")
        return
    failure: list[BaseException] = []

    def launch() -> None:
        try:
            own = os.getpriority(os.PRIO_PROCESS, 0)  # this thread's (Linux)
            os.setpriority(os.PRIO_PROCESS, 0, min(19, own + niceness))
            spark_conf = SparkConf().setAll(list(conf.items()))
            SparkContext._ensure_initialized(conf=spark_conf)  # noqa: SLF001 - starts the JVM
        except BaseException as error:  # re-raised on the caller's thread
            failure.append(error)

    thread = threading.Thread(target=launch, name="spark-jvm-launch")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
