"""Errors raised by the lakehouse application.

Every error the application raises on purpose derives from :class:`LakehouseError`, so callers
(the CLI above all) can tell a reported problem from a bug.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Root of the errors the lakehouse application raises on purpose."""


class SparkClasspathError(LakehouseError):
    """The jars a Spark session needs are missing; the message says which and how to get them."""


class ConfigError(LakehouseError):
    """``lakehouse.yaml`` is missing or invalid.

    Attributes:
        key: The config key path at fault, e.g. ``views.0.every``.
    """

    def __init__(self, message: str, *, key: str | None = None):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class ListenError(LakehouseError):
    """A server of the pipeline cannot listen on its address (it is taken, for one).

    The message is one line naming the setting, the address and the reason, e.g.
    ``catalog.listen 127.0.0.1:8181: address already in use``.

    Attributes:
        key: The setting that gave the address: a config key (``catalog.listen``) or a
            command-line option (``--metrics-listen``).
        address: ``host:port``.
        reason: Why it cannot be bound, as the system says it.
    """

    def __init__(self, address: str, reason: str, *, key: str):
        self.key = key
        self.address = address
        self.reason = reason
        super().__init__(f"{key} {address}: {reason}")

    @classmethod
    def from_os_error(cls, address: str, error: OSError, *, key: str) -> ListenError:
        """The error for a failed ``bind``, its reason from the system's message.

        Args:
            address: ``host:port``.
            error: What ``socket.bind`` (or the name lookup before it) raised.
            key: The setting that gave the address.

        Returns:
            The error, e.g. ``--metrics-listen 127.0.0.1:9464: address already in use``.
        """
        reason = error.strerror or str(error) or type(error).__name__
        return cls(address, reason[:1].lower() + reason[1:], key=key)


class CatalogUnavailableError(LakehouseError):
    """No Iceberg REST catalog answers at the configured URI.

    Attributes:
        uri: The catalog's base URI.
    """

    def __init__(self, uri: str, reason: str):
        self.uri = uri
        super().__init__(f"catalog.uri {uri}: no Iceberg REST catalog answers ({reason})")


class CatalogAccessError(LakehouseError):
    """The catalog answers but refuses the pipeline: no credential, or a refused one.

    The message names ``catalog.credential``, the client id and the catalog's reason.

    Attributes:
        uri: The catalog's base URI.
        client_id: The pipeline's client id; None when no credential is configured.
    """

    def __init__(self, uri: str, client_id: str | None, reason: str):
        self.uri = uri
        self.client_id = client_id
        who = f"client {client_id!r}" if client_id else "anonymous access (no credential)"
        super().__init__(f"catalog.credential: the catalog at {uri} refuses {who}: {reason}")


class SourceError(LakehouseError):
    """A source cannot be read: missing table, unknown version, bad change feed.

    Attributes:
        source: The source's name in the config.
    """

    def __init__(self, message: str, *, source: str):
        self.source = source
        super().__init__(f"source {source!r}: {message}")


class RefreshError(LakehouseError):
    """A refresh (tick) of a view failed.

    Nothing of it was committed to the sink that failed. Sinks commit at once
    (:mod:`lakehouse.sink_commits`) and each commit stands on its own, so a failure of one
    leaves the other committed at the new frontier; the next tick brings the failed one
    there (exactly once, since each sink's commit records its frontier).

    Attributes:
        view: The view's name.
        committed: The sink kinds (``iceberg``, ``delta``) this refresh committed to,
            though it failed; empty when it committed nothing.
    """

    def __init__(self, message: str, *, view: str, committed: tuple[str, ...] = ()):
        self.view = view
        self.committed = committed
        suffix = f" (committed to {', '.join(committed)} nonetheless)" if committed else ""
        super().__init__(f"view {view!r}: {message}{suffix}")


class SnapshotExpiredError(SourceError):
    """A version a change feed starts from (or passes through) is gone from the source.

    Iceberg ``expire_snapshots`` or Delta ``VACUUM``/log cleanup removed the metadata or
    the files that the change since ``version`` needs. The change cannot be read; only a
    full refresh of the view (recompute from the current snapshot) can catch up.

    Attributes:
        source: The source's name in the config.
        version: The expired Iceberg snapshot id or Delta version.
    """

    def __init__(self, message: str, *, source: str, version: int):
        self.version = version
        super().__init__(f"{message}; a full refresh is needed", source=source)


class SchemaChangedError(RefreshError):
    """A column a view reads was dropped, renamed or retyped in a source: the view stops.

    Raised before the refresh reads or writes anything. The view resumes only when the
    column is restored, or after it is rebuilt (its tables dropped, so the next tick
    loads it anew from the sources as they are).

    Attributes:
        view: The view's name.
        source: The source's name in the config (the first change, when several).
        column: The column's name as the view reads it.
        change: ``dropped``, ``renamed``, ``retyped`` or ``replaced``.
    """

    def __init__(self, message: str, *, view: str, source: str, column: str, change: str):
        self.source = source
        self.column = column
        self.change = change
        super().__init__(f"stopped: {message}; nothing was written", view=view)


class StorageError(LakehouseError):
    """The warehouse's storage cannot be used: no such bucket, no answer, no credentials.

    The message is one line naming the setting at fault and never a credential, e.g.
    ``catalog.s3.endpoint http://127.0.0.1:9: cannot connect``.

    Attributes:
        key: The config key (``warehouse``, ``catalog.s3.endpoint``, ``catalog.s3.region``)
            or standard AWS environment variable (``AWS_PROFILE``, ``AWS_ENDPOINT_URL``)
            at fault.
    """

    def __init__(self, message: str, *, key: str):
        self.key = key
        super().__init__(f"{key} {message}")


class HistoryError(LakehouseError):
    """The refresh history table cannot be read or written, or names no such view.

    Attributes:
        table: The history table's identifier (``history_table`` in the config).
    """

    def __init__(self, message: str, *, table: str):
        self.table = table
        super().__init__(f"history table {table!r}: {message}")


class SubscriptionError(LakehouseError):
    """A view's changes cannot be followed from where the subscriber asked.

    Attributes:
        view: The view's name.
    """

    def __init__(self, message: str, *, view: str):
        self.view = view
        super().__init__(f"view {view!r}: {message}")


class WaitTimeoutError(LakehouseError):
    """No snapshot of a view reflected a source's snapshot within the time given.

    Attributes:
        view: The view's name.
        source: The source's name in the config.
        version: The source snapshot (Iceberg) or version (Delta) waited for.
        reason: Why the view is late (its degraded reason), as far as known.
    """

    def __init__(self, message: str, *, view: str, source: str, version: int, reason: str):
        self.view, self.source, self.version, self.reason = view, source, version, reason
        super().__init__(f"view {view!r}: {message}: {reason}")


class MaintenanceError(LakehouseError):
    """Maintenance of a view's tables (snapshot expiry, compaction, vacuum) failed.

    What committed before the failure stands (each step is one commit of its own: a
    compaction, an expiry, a Delta ``OPTIMIZE`` or ``VACUUM``); nothing any reader needs
    was removed. The next run tries again.

    Attributes:
        view: The view's name.
        step: The step that failed: ``expire``, ``compact``, ``delta`` or ``read``.
    """

    def __init__(self, message: str, *, view: str, step: str):
        self.view = view
        self.step = step
        super().__init__(f"view {view!r}: maintenance ({step}): {message}")
