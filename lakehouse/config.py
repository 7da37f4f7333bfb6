"""``lakehouse.yaml``: the warehouse, the catalog, Spark, the sources and the views.

The file is validated by pydantic; an invalid file raises one :class:`ConfigError`
that names the key path and what is expected, before anything starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

import yaml
from croniter import croniter
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from catalog_api.core.config import S3Settings
from catalog_api.security import AuthSettings, SecretSource
from ivm import DRIVER_READ_MAX_ROWS
from lakehouse.errors import ConfigError
from lakehouse.memory import memory_limit_bytes

COLUMN_CACHE_MEMORY_FRACTION = 0.25
"""The default ``column_cache_bytes``, as a fraction of the memory the process may use.

Measured: TPC-H SF 1 deletes in Q1, Q3 and Q5 keep about 0.7 GiB; at SF 3 they need more
than 1 GiB (with 1 GiB, every scattered delete decoded its row groups again: 1-4 s a
refresh against 0.1-0.2 s with 6 GiB, a quarter of a 24 GiB machine)."""

DRIVER_READ_ROW_BYTES = 64
"""Bytes the column cache keeps per row a join partner read on the driver scans: the key
column and its sorted index (8 + 8 bytes, 8 more when the file is not sorted by it) and
the few other columns the view reads (8 to 16 bytes each), which a scattered change
decodes whole. :attr:`Config.driver_read_max_rows` lets a read scan as many rows as the
cache can keep, so that a partner decoded once stays decoded."""

DOWNSTREAM = "downstream"
"""``target_lag`` of a view refreshed only when a view that reads it refreshes."""
DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogCredential(SecretSource):
    """The pipeline's own principal at the catalog: an OAuth2 client id and its secret.

    The secret comes from ``secret_env`` or ``secret_file`` (exactly one), read as the
    catalog reads its clients' secrets (:class:`catalog_api.security.SecretSource`).

    Attributes:
        client_id: The client id (a key of ``catalog.auth.clients`` for the embedded one).
    """

    client_id: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> CatalogCredential:
        if (self.secret_env is None) == (self.secret_file is None):
            raise ValueError("set exactly one of secret_env, secret_file")
        return self

    def credential(self) -> str:
        """``client_id:secret``, as pyiceberg, Spark and Trino take it.

        Raises:
            ConfigError: The variable is unset or the file unreadable (key
                ``catalog.credential.secret_env`` or ``.secret_file``).
        """
        source = "secret_env" if self.secret_env is not None else "secret_file"
        try:
            secret = self.read_secret()
        except ValueError as error:
            raise ConfigError(str(error), key=f"catalog.credential.{source}") from None
        return f"{self.client_id}:{secret}"


class CatalogConfig(_Strict):
    """The Iceberg REST catalog the pipeline reads and writes through.

    Attributes:
        embedded: Start the catalog service inside ``lakehouse run``.
        listen: ``host:port`` the embedded service listens on.
        uri: Base URI of the catalog (clients append ``/v1``); defaults to the
            embedded service's ``http://<listen>/iceberg``.
        database_url: SQLAlchemy URL of the catalog store; defaults to a SQLite file
            ``catalog.db`` in the warehouse folder (beside the config file for an
            ``s3://`` warehouse).
        auth: Authentication and roles of the catalog this file serves (``lakehouse
            serve``, the embedded one); see ``docs/security.md``. Off, the service only
            listens on loopback.
        credential: The pipeline's own principal, required when ``auth`` is enabled.
        s3: Object storage of an ``s3://`` warehouse (and Delta sources): its endpoint,
            region and path-style access, for the pipeline (Spark, delta-rs, pyarrow,
            DuckDB; :mod:`lakehouse.storage`) and the catalog service alike, and whether
            the service vends credentials and signs requests for clients (scoped to each
            table's location and to the caller's role). The service's own keys come from
            the standard AWS environment when ``access_key_id`` is unset; the pipeline's
            always do.
    """

    embedded: bool = True
    listen: str = "127.0.0.1:8181"
    uri: str | None = None
    database_url: str | None = None
    auth: AuthSettings = Field(default_factory=AuthSettings)
    credential: CatalogCredential | None = None
    s3: S3Settings | None = None

    @model_validator(mode="after")
    def _pipeline_principal(self) -> CatalogConfig:
        if self.auth.enabled and self.credential is None:
            raise ValueError("catalog.auth is enabled: set catalog.credential, the pipeline's "
                             "own client")
        clients = self.auth.clients
        if self.auth.enabled and self.credential and clients and (
                self.credential.client_id not in clients):
            raise ValueError(f"catalog.credential.client_id {self.credential.client_id!r} is "
                             f"not among catalog.auth.clients {sorted(clients)}")
        return self

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("expected host:port, e.g. 127.0.0.1:8181")
        return value

    @property
    def host(self) -> str:
        """The host part of ``listen``."""
        return self.listen.rpartition(":")[0]

    @property
    def port(self) -> int:
        """The port part of ``listen``."""
        return int(self.listen.rpartition(":")[2])


DEFAULT_SPARK_NICENESS = 10
"""How much lower than the pipeline's the CPU priority of a local Spark JVM is, by default.

A local master runs the executors in the driver's JVM, on the cores the pipeline's own
process needs for its local-engine ticks (refreshes of a fraction of a second, held to a
target lag of seconds) and the catalog service. On the soak benchmark's two cores, two
Spark full refreshes took a whole core and the fast views' lag rose past their 5 s target.
Lowered by 10 (Linux ``nice``, as Spark's ``SPARK_NICENESS`` lowers its daemons), the JVM
still has every core nobody else wants and yields them to the latency-bound work when it
wants them."""


class SparkConfig(_Strict):
    """The Spark session of the pipeline.

    Attributes:
        master: Spark master URL (``local[2]``, ``spark://host:7077``...). Unset: the
            ``--master`` of ``spark-submit`` when the pipeline runs under it, else
            ``local[2]`` (:func:`lakehouse.spark.session.build_spark_session`).
        catalog_name: Name of the Iceberg catalog inside Spark SQL.
        conf: Extra Spark properties.
        jars: Jar paths for ``spark.jars`` instead of those resolved from the package's Maven
            manifest (:func:`lakehouse.spark.jars.spark_jars`).
        jars_packages: Maven coordinates for ``spark.jars.packages``, resolved by Spark itself
            instead (:func:`lakehouse.spark.jars.maven_coordinates` lists them).
        log_level: Spark's log level once the session runs.
        niceness: With a ``local`` master, how much lower the Spark JVM's CPU priority is
            than the pipeline's (Linux ``nice``, 0 to 19; 0 keeps it equal); see
            :data:`DEFAULT_SPARK_NICENESS`.
    """

    master: str | None = None
    catalog_name: str = "lakehouse"
    conf: dict[str, str] = Field(default_factory=dict)
    jars: list[str] = Field(default_factory=list)
    jars_packages: str | None = None
    log_level: Literal["ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"] = "ERROR"
    niceness: int = Field(default=DEFAULT_SPARK_NICENESS, ge=0, le=19)


class IcebergSource(_Strict):
    """An Iceberg table read through the catalog, by identifier ``namespace.table``.

    Attributes:
        iceberg: The table's identifier.
        ref: The branch or tag whose snapshots are followed.
        key: The table's primary key (unique, never NULL); defaults to the table's
            Iceberg identifier fields.
    """

    iceberg: str
    ref: str = "main"
    key: list[str] | None = Field(default=None, min_length=1)

    @field_validator("iceberg")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not all(IDENTIFIER.match(part) for part in value.split(".")) or "." not in value:
            raise ValueError("expected an identifier namespace.table, e.g. raw.flights")
        return value


class DeltaSource(_Strict):
    """A Delta table, by path or URI (``file://``, ``s3://``).

    Attributes:
        delta: The table's path or URI.
        key: The table's primary key (unique, never NULL), if it has one.
    """

    delta: str
    key: list[str] | None = Field(default=None, min_length=1)


class ViewSource(_Strict):
    """Another maintained view of this config, read through its Iceberg table."""

    view: str


SOURCE_KINDS = {"iceberg": IcebergSource, "delta": DeltaSource, "view": ViewSource}
"""Each kind of source, by the key that names it in the config."""


def _source_kind(value: object) -> str | None:
    """The kind of a source: the first of :data:`SOURCE_KINDS`' keys it has.

    Makes a source's errors name its kind's fields (``sources.a.delta.key``) rather than
    every kind's (``sources.a.iceberg: Field required``).
    """
    for kind, model in SOURCE_KINDS.items():
        if isinstance(value, model) or (isinstance(value, dict) and kind in value):
            return kind
    return None


Source = Annotated[
    Annotated[IcebergSource, Tag("iceberg")] | Annotated[DeltaSource, Tag("delta")]
    | Annotated[ViewSource, Tag("view")],
    Discriminator(_source_kind, custom_error_type="source_kind",
                  custom_error_message="a source needs one of the keys iceberg, delta or view"),
]
Sink = Literal["iceberg", "delta"]
ALL_SINKS: tuple[Sink, ...] = ("iceberg", "delta")
DEFAULT_FULL_REFRESH_RATIO = 0.35
"""Under ``auto``, a change of more than 35% of the sources' rows is recomputed in full.

Measured (docs/benchmarks.md, *Crossover*; ``python -m tests.benchmarks --parts crossover``):
at TPC-H SF 0.1, views Q1, Q3 and Q5 after inserts and merge-on-read deletes of 5% to 60%
of the orders, the incremental refresh cost less CPU than Spark's full refresh up to a
change of at least 37% for every view and change kind in which it is cheaper at all
(inserts: cheaper at every share measured, up to 37%; Q1 deletes: up to about 60%).
35% is the lowest of those crossovers rounded down to 5%. Scattered deletes in the join
views Q3 and Q5 were cheaper to recompute at every size measured, which no threshold on
the change's size can separate.
"""


EngineSetting = Literal["auto", "spark", "local"]
"""Which engine computes a view's incremental ticks (:mod:`ivm.engine_rule`).

- ``auto``: the local engine (DuckDB in process, no Spark job) when the view's plan and the
  tick's sizes allow it, else Spark;
- ``spark``: always Spark, nothing on the driver: the aggregate state stays on the
  executors and the sinks are written from them (for a cluster, where the driver is small);
- ``local``: as ``auto``, but a view whose plan the local engine cannot take is refused
  when it is compiled, with the reason, instead of running on Spark unnoticed.

Initial loads and full refreshes run on Spark whatever the setting.
"""


class ViewConfig(_Strict):
    """One maintained view.

    Attributes:
        name: ``namespace.table`` of the view's Iceberg table (and Delta folder).
        sql: One SELECT over the sources, by their config names (Spark SQL).
        every: Cadence: a duration (``30s``, ``5m``), a cron expression, or ``on_change``.
        key: Output columns that identify a row; inferred from GROUP BY when omitted.
        refresh: ``auto`` (incremental where possible), ``incremental`` (fail when
            impossible) or ``full``.
        full_refresh_ratio: Under ``auto``, recompute in full when the change feed rows
            exceed this fraction of the sources' rows.
        sinks: Where each refresh is committed.
        engine: The engine of the view's incremental ticks (:data:`EngineSetting`); the
            top-level ``engine`` when omitted.
        target_lag: How stale the view may be: a duration (``5s``, ``10m``), or
            ``downstream`` (refreshed only when a view that reads it refreshes). Without an
            explicit ``every``, a duration sets the cadence (:mod:`lakehouse.scheduler`);
            either way the lag is measured against it (SLO compliance, the ``over target``
            degraded reason).
    """

    name: str
    sql: str
    every: str = "on_change"
    key: list[str] | None = None
    refresh: Literal["auto", "incremental", "full"] = "auto"
    full_refresh_ratio: float = Field(default=DEFAULT_FULL_REFRESH_RATIO, gt=0)
    sinks: list[Sink] = Field(default_factory=lambda: list(ALL_SINKS), min_length=1)
    engine: EngineSetting | None = None
    target_lag: str | None = None

    @field_validator("target_lag")
    @classmethod
    def _target_lag(cls, value: str | None) -> str | None:
        seconds = duration_s(value) if value is not None else None
        if value is None or value == DOWNSTREAM or (seconds is not None and seconds > 0):
            return value
        raise ValueError("expected a positive duration like 5s or 10m, or downstream")

    @property
    def target_lag_s(self) -> float | None:
        """The target lag in seconds when it is a duration, else None."""
        return duration_s(self.target_lag) if self.target_lag else None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return IcebergSource._identifier(value)

    @field_validator("every")
    @classmethod
    def _cadence(cls, value: str) -> str:
        if value == "on_change" or DURATION.match(value) or croniter.is_valid(value):
            return value
        raise ValueError("expected a duration like 30s or 5m, a cron expression, or on_change")

    @property
    def interval_s(self) -> float | None:
        """The cadence in seconds when it is a duration, else None."""
        return duration_s(self.every)


DEFAULT_TARGET_FILE_SIZE_BYTES = 128 * 1024 * 1024
"""Default ``maintenance.target_file_size_bytes``: Iceberg's ``write.target-file-size-bytes``
default (512 MiB) is for large tables; a view table is read whole by its subscribers."""


class MaintenanceConfig(_Strict):
    """Snapshot expiry and small-file compaction of the view tables (:mod:`lakehouse.maintenance`).

    Attributes:
        every: Cadence: a duration (``1h``) or a cron expression; null (or ``off``)
            disables scheduled maintenance (``lakehouse maintain`` still runs it).
        retain_for: Snapshots (Iceberg), removed files (Delta ``VACUUM``) and Delta log
            entries (``delta.logRetentionDuration``) younger than this are kept: a
            duration, ``0s`` keeps none for age alone.
        keep_snapshots: The newest snapshots of each view table kept whatever their age
            (at least 1: the current one).
        compact_min_files: Compact a table once it has at least this many small data files
            (smaller than 3/4 of ``target_file_size_bytes``, Iceberg's
            ``min-file-size-bytes`` default); fewer, and no compaction commit is made.
        target_file_size_bytes: The size compaction aims at for each data file.
        delta_vacuum: Also ``VACUUM`` the Delta copy (delete the files no version younger
            than ``retain_for``, nor the newest ``keep_snapshots`` versions, reads).
    """

    every: str | None = "1h"
    retain_for: str = "24h"
    keep_snapshots: int = Field(default=10, ge=1)
    compact_min_files: int = Field(default=8, ge=2)
    target_file_size_bytes: int = Field(default=DEFAULT_TARGET_FILE_SIZE_BYTES, ge=1024 * 1024)
    delta_vacuum: bool = True

    @field_validator("every", mode="before")
    @classmethod
    def _cadence(cls, value: object) -> object:
        if value is None or value is False or value == "off":  # YAML reads a bare off as false
            return None
        if isinstance(value, str) and (
                (duration_s(value) or 0) > 0 or croniter.is_valid(value)):
            return value
        raise ValueError("expected a duration like 1h, a cron expression, or null (off)")

    @field_validator("retain_for")
    @classmethod
    def _retain_for(cls, value: str) -> str:
        if duration_s(value) is None:
            raise ValueError("expected a duration like 24h or 30m (0s: keep none for age)")
        return value

    @property
    def interval_s(self) -> float | None:
        """The cadence in seconds when it is a duration, else None (cron, or disabled)."""
        return duration_s(self.every) if self.every else None

    @property
    def retain_for_s(self) -> float:
        """``retain_for`` in seconds."""
        return duration_s(self.retain_for) or 0.0


def duration_s(text: str) -> float | None:
    """Seconds of a duration like ``30s``, ``500ms``, ``5m``, ``1h`` or ``7d``; else None."""
    match = DURATION.match(text.strip())
    return float(match.group(1)) * _UNIT_S[match.group(2)] if match else None


def default_column_cache_bytes() -> int:
    """The default ``column_cache_bytes``: a fraction of the memory the process may use.

    :data:`COLUMN_CACHE_MEMORY_FRACTION` of :func:`lakehouse.memory.memory_limit_bytes`.
    """
    return int(memory_limit_bytes() * COLUMN_CACHE_MEMORY_FRACTION)


DEFAULT_WORKERS = 4
"""Refreshes run at once by default: a tick mostly waits (on the catalog, on storage, on
Spark's executors), so a few threads keep a slow view from holding up the others."""
MAX_WORKERS = 64
"""The most refreshes ``workers`` may run at once."""


class Config(_Strict):
    """The whole ``lakehouse.yaml``.

    Attributes:
        warehouse: Folder (or ``s3://`` URI) holding every table the pipeline writes.
        catalog: The REST catalog.
        spark: The Spark session.
        sources: Source name -> Iceberg identifier or Delta path.
        views: The maintained views.
        column_cache_bytes: Most bytes of decoded columns of Iceberg source data files
            kept in the driver's memory between ticks (0: none), for deletes and join
            partners read on the driver (:mod:`lakehouse.sources.column_cache`). By
            default :data:`COLUMN_CACHE_MEMORY_FRACTION` of the memory the process may
            use (:func:`lakehouse.memory.memory_limit_bytes`).
        engine: The engine of every view's incremental ticks unless the view sets its
            own (:data:`EngineSetting`).
        history_table: ``namespace.table`` of the refresh history in the catalog (one row
            per refresh, and which views are suspended: :mod:`lakehouse.history`); null
            keeps no history and suspends nothing. Its namespace is not the Spark
            catalog's name (``lakehouse``), which Spark SQL would read as the catalog.
        history_retain_for: Rows of the refresh history older than this duration are
            removed when its data files are compacted (:data:`lakehouse.history.COMPACT_FILES`
            appends), but each view's newest; null keeps every row.
        maintenance: Snapshot expiry and small-file compaction of the view tables, and its
            schedule (:class:`MaintenanceConfig`).
        workers: Most refreshes ``lakehouse run`` runs at once, each on a thread of its
            own: views that share no view (upstream) refresh concurrently
            (:class:`lakehouse.scheduler.Scheduler`).
    """

    warehouse: str = "./warehouse"
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    sources: dict[Annotated[str, Field(pattern=IDENTIFIER.pattern)], Source] = Field(
        default_factory=dict
    )
    views: list[ViewConfig] = Field(default_factory=list)
    column_cache_bytes: int = Field(default_factory=default_column_cache_bytes, ge=0)
    engine: EngineSetting = "auto"
    history_table: str | None = "pipeline.refresh_history"
    history_retain_for: str | None = "7d"
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    workers: int = Field(default=DEFAULT_WORKERS, ge=1, le=MAX_WORKERS)

    @field_validator("history_table")
    @classmethod
    def _history_table(cls, value: str | None) -> str | None:
        return None if value is None else IcebergSource._identifier(value)

    @field_validator("history_retain_for", mode="before")
    @classmethod
    def _history_retain_for(cls, value: object) -> object:
        if value is None or value is False or value == "off":  # YAML reads a bare off as false
            return None
        if isinstance(value, str) and (duration_s(value) or 0) > 0:
            return value
        raise ValueError("expected a duration like 7d or 12h, or null (keep every row)")

    @property
    def history_retain_for_s(self) -> float | None:
        """``history_retain_for`` in seconds; None keeps every row."""
        return duration_s(self.history_retain_for) if self.history_retain_for else None

    def view_engine(self, view: ViewConfig) -> EngineSetting:
        """The engine setting of ``view``: its own, else the top-level one."""
        return view.engine or self.engine

    @property
    def driver_read_max_rows(self) -> int:
        """Most rows a join partner read on the driver may scan in one table.

        As many as the column cache can keep decoded (``column_cache_bytes`` //
        :data:`DRIVER_READ_ROW_BYTES`), and never fewer than ``ivm``'s
        ``DRIVER_READ_MAX_ROWS``; a larger read runs on Spark.
        """
        return max(DRIVER_READ_MAX_ROWS, self.column_cache_bytes // DRIVER_READ_ROW_BYTES)

    @model_validator(mode="after")
    def _references(self) -> Config:
        names = [view.name for view in self.views]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ValueError(f"view names must be unique; repeated: {sorted(duplicates)}")
        if self.history_table in names:
            raise ValueError(f"history_table {self.history_table!r} is also a view's name")
        if self.history_table and self.history_table.split(".")[0] == self.spark.catalog_name:
            raise ValueError(f"history_table {self.history_table!r}: its namespace is the Spark "
                             "catalog's name, which Spark SQL would read as the catalog")
        for view in self.views:
            if view.target_lag == DOWNSTREAM and not self._read_by_a_view(view.name):
                raise ValueError(f"view {view.name!r} has target_lag downstream, but no view "
                                 "reads it: nothing would refresh it")
        for name, source in self.sources.items():
            if isinstance(source, ViewSource) and source.view not in names:
                raise ValueError(f"source {name!r} reads view {source.view!r}, which is not "
                                 f"among the views {names}")
        return self

    def _read_by_a_view(self, name: str) -> bool:
        """Whether the SQL of some view reads a source that is view ``name``."""
        from ivm import IvmError, referenced_sources

        sources = {s for s, source in self.sources.items()
                   if isinstance(source, ViewSource) and source.view == name}
        for view in self.views:
            try:
                if sources & referenced_sources(view.sql):
                    return True
            except IvmError:
                continue  # reported when that view compiles
        return False

    def view(self, name: str) -> ViewConfig:
        """Return the view called ``name``.

        Raises:
            ConfigError: No view has that name.
        """
        for view in self.views:
            if view.name == name:
                return view
        raise ConfigError(f"no view {name!r}; views: {[v.name for v in self.views]}", key="views")

    @property
    def catalog_uri(self) -> str:
        """Base URI of the REST catalog (``.../iceberg``)."""
        return self.catalog.uri or f"http://{self.catalog.listen}/iceberg"

    @property
    def warehouse_is_local(self) -> bool:
        """Whether the warehouse is a local folder: a path or a ``file:`` URI (any spelling)."""
        return urlsplit(self.warehouse).scheme.lower() in ("", "file")

    @property
    def warehouse_path(self) -> Path:
        """The local warehouse folder, absolute.

        Raises:
            ConfigError: The warehouse is not local.
        """
        if not self.warehouse_is_local:
            raise ConfigError("the warehouse is not a local folder", key="warehouse")
        return Path(_location(self.warehouse))

    def delta_uri(self, view: ViewConfig) -> str:
        """Where the Delta copy of ``view`` lives: ``<warehouse>/delta/<namespace>/<table>``."""
        namespace, table = view.name.rsplit(".", 1)
        if self.warehouse_is_local:
            return str(self.warehouse_path / "delta" / namespace / table)
        return f"{self.warehouse.rstrip('/')}/delta/{namespace}/{table}"

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as a URI (``file:///...`` or ``s3://...``)."""
        return self.warehouse_path.as_uri() if self.warehouse_is_local else self.warehouse

    @property
    def database_url(self) -> str:
        """SQLAlchemy URL of the catalog store.

        By default a SQLite file: ``catalog.db`` in a local warehouse folder; for an object
        store warehouse (where SQLite cannot live), ``catalog.db`` beside the config file
        (:func:`load_config` sets it; the working folder for a config parsed without one).
        """
        if self.catalog.database_url:
            return self.catalog.database_url
        folder = self.warehouse_path if self.warehouse_is_local else Path.cwd()
        return f"sqlite:///{folder / 'catalog.db'}"


def parse_config(data: object, *, base_dir: Path | None = None) -> Config:
    """Validate a parsed YAML document as a :class:`Config`.

    Relative local paths (the warehouse, Delta sources) resolve against ``base_dir``.

    Raises:
        ConfigError: The document is invalid; names the first key path at fault.
    """
    try:
        config = Config.model_validate(data if data is not None else {})
    except ValidationError as error:
        first = error.errors()[0]
        loc = list(first["loc"])
        if loc[:1] == ["sources"] and len(loc) > 3 and loc[2] in SOURCE_KINDS:
            del loc[2]  # the kind's tag, not a key of the document
        key = ".".join(str(part) for part in loc)
        raise ConfigError(f"{first['msg']}{_shown_input(key, first.get('input'))}",
                          key=key) from None
    config = _resolved(config, base_dir) if base_dir is not None else config
    _refuse_view_tables_as_sources(config)
    return config


def _refuse_view_tables_as_sources(config: Config) -> None:
    """Refuse an ``iceberg:`` or ``delta:`` source that is a view's own table.

    Read so, the view would be a plain table to the pipeline: its readers would not be
    refreshed after it (a ``view:`` source orders the ticks, :mod:`lakehouse.dag`), and the
    view's maintenance would not keep the snapshots their frontiers name.

    Raises:
        ConfigError: Such a source (key ``sources.<name>.iceberg`` or ``.delta``).
    """
    readable = [view for view in config.views if "iceberg" in view.sinks]  # what view: reads
    tables = {view.name: view.name for view in readable}
    folders = {_location(config.delta_uri(view)): view.name for view in readable}
    for name, source in config.sources.items():
        if isinstance(source, IcebergSource) and source.iceberg in tables:
            key, view = f"sources.{name}.iceberg", tables[source.iceberg]
        elif isinstance(source, DeltaSource) and _location(source.delta) in folders:
            key, view = f"sources.{name}.delta", folders[_location(source.delta)]
        else:
            continue
        raise ConfigError(f"this is view {view!r}'s own table; declare the source as "
                          f"`view: {view}`, so that it refreshes before the views reading "
                          "it and keeps the snapshots their frontiers need", key=key)


def _location(path_or_uri: str) -> str:
    """A table's location, comparable across its spellings.

    A local path or ``file:`` URI (``file:/x``, ``file:///x``, ``file://localhost/x``)
    becomes an absolute path; another URI keeps its bucket and path without a final
    slash, its scheme in lower case, Hadoop's ``s3a``/``s3n`` read as ``s3``.
    """
    parsed = urlsplit(path_or_uri)
    scheme = parsed.scheme.lower()
    if not scheme:
        return str(Path(path_or_uri).expanduser().resolve())
    if scheme == "file":
        return str(Path(unquote(parsed.path)).resolve())
    scheme = {"s3a": "s3", "s3n": "s3"}.get(scheme, scheme)
    return f"{scheme}://{parsed.netloc}{parsed.path}".rstrip("/")


_SECRET_KEYS = re.compile(r"secret|password|token|key|credential", re.IGNORECASE)


def _shown_input(key: str, value: object) -> str:
    """`` (got <value>)`` for an error message: scalars only, and never a secret's value.

    A model-level error's input is a whole section (``catalog``, say), which may hold
    secrets; so are keys such as ``secret_access_key``.
    """
    if isinstance(value, dict | list) or _SECRET_KEYS.search(key):
        return ""
    return f" (got {value!r})"


def load_config(path: Path) -> Config:
    """Read and validate ``lakehouse.yaml``.

    Raises:
        ConfigError: The file is missing, is not YAML, or is invalid.
    """
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read config file: {error.strerror}", key=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"not valid YAML: {error}", key=str(path)) from None
    return parse_config(data, base_dir=path.parent.resolve())


def _resolved(config: Config, base_dir: Path) -> Config:
    def local(path: str) -> str:
        if urlsplit(path).scheme:  # a URI (file:/x too), not a relative path
            return path
        return str((base_dir / Path(path).expanduser()).resolve())

    sources = {
        name: s.model_copy(update={"delta": local(s.delta)}) if isinstance(s, DeltaSource) else s
        for name, s in config.sources.items()
    }
    catalog = config.catalog
    if not config.warehouse_is_local and catalog.database_url is None:
        catalog = catalog.model_copy(
            update={"database_url": f"sqlite:///{base_dir.resolve() / 'catalog.db'}"})
    return config.model_copy(update={"warehouse": local(config.warehouse), "sources": sources,
                                     "catalog": catalog})
