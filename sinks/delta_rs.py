"""The in-process Delta writer: a view delta held in Arrow, committed with delta-rs.

Used when the tick computed the delta on the driver (:meth:`sinks.delta.DeltaSink.apply` of
Arrow rows).
A delta is appended (inserts only) or applied in one ``MERGE`` whose source marks every
changed key or row ``delete`` and every row to insert ``insert`` (:mod:`sinks.merge_source`,
built here in Arrow and DuckDB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import DeltaError

from ivm import WEIGHT
from sinks.arrow_zset import expanded
from sinks.delta_commit import CREATE_CONFIGURATION, USER_METADATA, DeltaCommit
from sinks.errors import SinkError
from sinks.merge_source import OP


def _commit_properties(commit: DeltaCommit) -> CommitProperties:
    return CommitProperties(
        custom_metadata={USER_METADATA: commit.user_metadata},  # delta-rs maps it to the field
        max_commit_retries=0,
        app_transactions=[Transaction(app_id=commit.app_id, version=commit.version)],
    )


def write(target: DeltaTable | str, rows: pa.Table, mode: Literal["append", "overwrite"],
          commit: DeltaCommit, storage_options: dict[str, str] | None) -> None:
    """Append or overwrite ``rows`` (the view's columns) in one commit.

    Args:
        target: The table as the refresh read it, or its URI when it does not exist yet.
        rows: The rows to write.
        mode: ``append`` or ``overwrite``; an append that creates the table fails if a
            concurrent refresh created it first (delta-rs would append a second copy).
        commit: What the commit carries.
        storage_options: delta-rs storage options.

    Raises:
        SinkError: The commit failed; the table is unchanged.
    """
    configuration = CREATE_CONFIGURATION if commit.create else None
    if commit.create:  # every column nullable, as Spark creates it: a MERGE's delete markers
        rows = rows.cast(pa.schema([field.with_nullable(True) for field in rows.schema]))
    how: Literal["append", "overwrite", "error"] = (
        "error" if commit.create and mode == "append" else mode)
    try:
        write_deltalake(target, rows, mode=how, commit_properties=_commit_properties(commit),
                        storage_options=storage_options, schema_mode=None,
                        configuration=configuration)
    except DeltaError as error:
        raise SinkError(f"write failed: {error}", table=_uri(target)) from error


def apply(table: DeltaTable | None, uri: str, delta: pa.Table, key: Sequence[str] | None,
          commit: DeltaCommit, storage_options: dict[str, str] | None) -> None:
    """Apply a consolidated Z-set (the view's columns plus ``_weight``) in one commit.

    Args:
        table: The table as the refresh read it, or None when it does not exist yet.
        uri: The table's path or URI.
        delta: The view delta.
        key: The view's unique key, or None when rows have multiplicities.
        commit: What the commit carries.
        storage_options: delta-rs storage options.

    Raises:
        SinkError: The commit failed; the table is unchanged.
    """
    lowest = pc.min(delta[WEIGHT]).as_py()
    only_inserts = key is None and (lowest is None or lowest > 0)
    if table is None or delta.num_rows == 0 or only_inserts:
        write(table or uri, expanded(delta), "append", commit, storage_options)
        return
    source = _keyed_source(delta, key) if key is not None else _multiset_source(delta, table)
    _merge(table, source, key, commit)


def _merge(table: DeltaTable, source: pa.Table, key: Sequence[str] | None,
           commit: DeltaCommit) -> None:
    columns = [c for c in source.column_names if c != OP]
    matched = key if key is not None else columns
    # DataFusion binds IS NOT DISTINCT FROM looser than AND: parenthesise every term.
    match = [f"(t.{_quoted(c)} IS NOT DISTINCT FROM s.{_quoted(c)})" for c in matched]
    predicate = " AND ".join([f"(s.{OP} = 'delete')", *match])
    try:
        (table.merge(source, predicate=predicate, source_alias="s", target_alias="t",
                     commit_properties=_commit_properties(commit))
         .when_matched_delete()
         .when_not_matched_insert({c: f"s.{_quoted(c)}" for c in columns},
                                  predicate=f"s.{OP} = 'insert'")
         .execute())
    except DeltaError as error:
        raise SinkError(f"merge failed: {error}", table=table.table_uri) from error


def _keyed_source(delta: pa.Table, key: Sequence[str]) -> pa.Table:
    """Delete markers for every changed key, then the new rows (see merge_source)."""
    columns = [c for c in delta.column_names if c != WEIGHT]
    if key:
        keys = delta.select(list(key)).group_by(list(key)).aggregate([])
        count = keys.num_rows
    else:
        keys, count = delta, min(delta.num_rows, 1)
    markers = pa.table(
        {c: keys[c] if c in key else pa.nulls(count, delta.schema.field(c).type) for c in columns}
        | {OP: pa.array(["delete"] * count, pa.string())}
    )
    inserts = delta.filter(pc.greater(delta[WEIGHT], 0)).select(columns)
    inserts = inserts.append_column(OP, pa.array(["insert"] * inserts.num_rows, pa.string()))
    schema = pa.schema([field.with_nullable(True) for field in inserts.schema])
    return pa.concat_tables([markers.cast(schema), inserts.cast(schema)])


def _multiset_source(delta: pa.Table, table: DeltaTable) -> pa.Table:
    """Delete markers for rows losing copies, then every copy to insert (see merge_source)."""
    columns = [c for c in delta.column_names if c != WEIGHT]
    same = " AND ".join(f"r.{_quoted(c)} IS NOT DISTINCT FROM t.{_quoted(c)}" for c in columns)
    select = ", ".join(f"r.{_quoted(c)}" for c in columns)
    query = f"""
        WITH removed AS (SELECT * FROM delta WHERE {WEIGHT} < 0),
        remaining AS (
            SELECT {select}, r.{WEIGHT} + (SELECT count(*) FROM current t WHERE {same}) AS __copies
            FROM removed r),
        inserts AS (
            SELECT {', '.join(map(_quoted, columns))}, {WEIGHT} AS __copies
            FROM delta WHERE {WEIGHT} > 0
            UNION ALL SELECT * FROM remaining)
        SELECT {', '.join(map(_quoted, columns))}, 'delete' AS {OP} FROM removed
        UNION ALL
        SELECT {', '.join(map(_quoted, columns))}, 'insert' AS {OP}
        FROM inserts, range(CAST(greatest(__copies, 0) AS BIGINT))
    """
    with duckdb.connect() as own:  # own connection: ticks of several views run in threads
        own.register("delta", delta)
        own.register("current", table.to_pyarrow_dataset())
        return pa.table(own.sql(query).arrow())


def _uri(target: DeltaTable | str) -> str:
    return target if isinstance(target, str) else target.table_uri


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
