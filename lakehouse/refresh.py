"""One tick of one view: change feeds past the frontier -> view delta -> every sink.

Each sink stores the frontier it reflects in its own commit. Sinks are grouped by
that frontier and each group gets the delta from its own frontier, so a crash
with one of the Iceberg and Delta commits landed is repaired by the next tick, exactly
once; the two commits run at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from operator import methodcaller
from typing import Literal

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from ivm import (
    DRIVER_READ_MAX_ROWS,
    DRIVER_STATE_MAX_ROWS,
    WEIGHT,
    Maintained,
    NotIncrementalError,
    SourceInput,
    ViewPlan,
    maintain,
    recompute,
    reload,
    used_columns,
)
from ivm.spark_observe import counted_checkpoint
from lakehouse.config import EngineSetting, ViewConfig
from lakehouse.errors import RefreshError, SnapshotExpiredError
from lakehouse.failpoints import failpoint
from lakehouse.progress import counted, phase
from lakehouse.sink_commits import SinkCommit, commit_all
from lakehouse.sources.base import ChangeFeed, SourceReader, TickReads
from lakehouse.view_state import ViewStates
from sinks.delta import DeltaSink
from sinks.iceberg import IcebergSink

Mode = Literal["incremental", "full", "skipped"]

FULL_REQUESTED = "full refresh requested"
"""The reason of a refresh asked to run in full (``lakehouse refresh --full``)."""


@dataclass
class RefreshResult:
    """What one refresh did.

    Attributes:
        view: The view's name.
        mode: ``incremental``, ``full`` or ``skipped`` (no source advanced).
        frontier: The source versions the view reflects afterwards.
        rows_in: Rows of the sources' change feeds read (incremental only).
        rows_out: Rows of the view delta committed (+ and -), or rows written (full).
        duration_s: Wall time of the refresh.
        reason: Why the refresh ran as ``full``, if it did.
        sinks: The sink kinds (``iceberg``, ``delta``) it committed to.
        engine: ``local`` when the view's delta was computed with no Spark job (DuckDB in
            process, :mod:`ivm.engine_rule`), ``spark`` otherwise, ``none`` when skipped.
        engine_reason: Why that engine (the sizes for ``local``; what the local engine
            could not take for ``spark``).
    """

    view: str
    mode: Mode
    frontier: dict[str, int]
    rows_in: int = 0
    rows_out: int = 0
    duration_s: float = 0.0
    reason: str | None = None
    sinks: list[str] = field(default_factory=list)
    engine: Literal["local", "spark", "none"] = "none"
    engine_reason: str = ""


@dataclass
class ViewSinks:
    """The sinks of one view, as configured."""

    iceberg: IcebergSink | None
    delta: DeltaSink | None

    def frontiers(self) -> dict[str, dict[str, int] | None]:
        """The committed frontier of each configured sink, by sink kind."""
        found: dict[str, dict[str, int] | None] = {}
        if self.iceberg is not None:
            found["iceberg"] = self.iceberg.frontier()
        if self.delta is not None:
            found["delta"] = self.delta.frontier()
        return found

    def release(self) -> None:
        """Hand back what the sinks keep between refreshes (the Delta table), once done."""
        if self.delta is not None:
            self.delta.release()


def current_frontier(readers: Mapping[str, SourceReader], sources: Iterable[str]
                     ) -> dict[str, int]:
    """The newest version of each of ``sources`` (those without data omitted).

    A tick's target. Inside a tick (readers :func:`lakehouse.sources.base.pinned`), an
    Iceberg reader loads its table's metadata here, and the tick's schema check and change
    feeds read that same load.
    """
    versions = {name: readers[name].current_version() for name in sources}
    return {name: version for name, version in versions.items() if version is not None}


def refresh_view(
    view: ViewConfig, plan: ViewPlan, readers: Mapping[str, SourceReader], sinks: ViewSinks,
    states: ViewStates | None = None,
    committed: Mapping[str, dict[str, int] | None] | None = None,
    target: dict[str, int] | None = None,
    driver_read_max_rows: int = DRIVER_READ_MAX_ROWS,
    engine: EngineSetting = "auto",
    full: bool = False,
) -> RefreshResult:
    """Bring every sink of ``view`` to the sources' current versions.

    Args:
        view: The view's configuration.
        plan: Its compiled plan.
        readers: A reader for every source of the plan.
        sinks: The view's sinks.
        states: Aggregate states kept between ticks (read at the old frontier, updated
            to the new one after the commits); None keeps no state.
        committed: The sinks' frontiers by kind (:meth:`ViewSinks.frontiers`), when the
            caller read them already in this tick; None reads them. Each sink's commit
            still requires the table state it started from.
        target: The sources' versions to refresh to (:func:`current_frontier` of the
            plan's sources), when the caller read them already in this tick; None reads
            them.
        driver_read_max_rows: Most rows a join partner read on the driver may scan in
            one table (:attr:`lakehouse.config.Config.driver_read_max_rows`).
        engine: The view's engine setting (:meth:`lakehouse.config.Config.view_engine`):
            ``spark`` reads no row on the driver (change feeds, join partners and the
            aggregate state stay on Spark), so no tick runs on the local engine.
        full: Recompute the view and replace every sink's content, even a sink already at
            ``target`` (``lakehouse refresh --full``). Each sink swaps its content in one
            commit: readers see the old snapshot until the new one lands, and the new
            snapshot carries ``target`` as its frontier.

    Raises:
        NotIncrementalError: The refresh policy is ``incremental`` and the plan is not.
        RefreshError: A source or sink failed; nothing of this refresh is committed
            to the sink that failed (``RefreshError.committed`` names the sinks that
            committed nonetheless).
    """
    started = time.perf_counter()
    if view.refresh == "incremental" and not plan.incremental:
        raise NotIncrementalError(plan.reason or "", view=view.name, fragment=plan.root.detail)
    target = target if target is not None else current_frontier(readers, plan.sources)
    frontiers = committed if committed is not None else sinks.frontiers()
    groups: dict[str, list[str]] = {}
    for kind, frontier in frontiers.items():
        if full or frontier != target:
            groups.setdefault("null" if full else json.dumps(frontier, sort_keys=True),
                              []).append(kind)
    result = RefreshResult(view.name, "skipped", target)
    states = states if states is not None else ViewStates()
    limits = (_Limits(0, 0, on_driver=False) if engine == "spark"
              else _Limits(driver_read_max_rows, DRIVER_STATE_MAX_ROWS))
    for encoded, kinds in groups.items():
        group = _Group(json.loads(encoded), target, kinds,
                       FULL_REQUESTED if full else None)
        _refresh_group(view, plan, readers, sinks, group, result, states, limits)
    result.duration_s = time.perf_counter() - started
    return result


@dataclass(frozen=True)
class _Group:
    """Sinks at the same frontier, refreshed together from ``old`` to ``new``.

    ``full_reason``: why the group is recomputed whatever its frontier, if it is.
    """

    old: dict[str, int] | None
    new: dict[str, int]
    kinds: list[str]
    full_reason: str | None = None


@dataclass(frozen=True)
class _Limits:
    """What the tick may hold on the driver (``maintain``'s arguments of the same names).

    ``on_driver`` False (engine ``spark``): no row is read on the driver at all, neither a
    change feed nor a join partner; Spark reads and computes everything.
    """

    driver_read_max_rows: int
    driver_state_max_rows: int
    on_driver: bool = True


def _refresh_group(
    view: ViewConfig, plan: ViewPlan, readers: Mapping[str, SourceReader], sinks: ViewSinks,
    group: _Group, result: RefreshResult, states: ViewStates, limits: _Limits,
) -> None:
    phase("read sources", view=view.name)
    try:
        full_reason = group.full_reason or _full_reason(view, plan, group.old)
        if full_reason is None:  # a full refresh reads the new snapshots, no change feed
            inputs, changed_rows, full_reason = _read_changes(readers, plan, group,
                                                              limits.on_driver)
        if full_reason is None:
            full_reason = _large_change_reason(view, readers, group.new, changed_rows)
            result.rows_in += changed_rows
        if full_reason is None:
            phase("compute view delta")
            kept = states.get(view.name, plan.sql, group.old, limits.on_driver)
            maintained = maintain(plan, inputs, kept,
                                  driver_state_max_rows=limits.driver_state_max_rows,
                                  driver_read_max_rows=limits.driver_read_max_rows,
                                  local=limits.on_driver)
            result.rows_out += _apply(sinks, group, maintained, plan, result.sinks,
                                      maintained.engine)
            previous = group.old  # the state's change was added to the state there
            result.mode = "incremental"
            result.engine, result.engine_reason = maintained.engine, (
                maintained.engine_reason if limits.on_driver
                else "engine: spark is set, so no row is read or held on the driver")
        else:
            phase("compute view", detail=full_reason)
            snapshots = _snapshot_inputs(readers, plan, group.new)
            maintained = (_recompute(plan, snapshots) if view.refresh == "full"
                          else reload(plan, snapshots, limits.driver_state_max_rows))
            result.rows_out += _replace(sinks, group, maintained, result.sinks)  # on Spark
            result.mode, result.reason = "full", full_reason
            result.engine, result.engine_reason = "spark", "a full recompute runs on Spark"
            previous = None
        states.put(view.name, plan.sql, group.new, maintained.state, previous)
    except RefreshError:
        raise
    except Exception as error:  # a refresh fails as a whole, with its cause attached
        cause = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RefreshError(f"refresh failed: {cause}", view=view.name,
                           committed=tuple(result.sinks)) from error


def _read_changes(readers: Mapping[str, SourceReader], plan: ViewPlan, group: _Group,
                  on_driver: bool) -> tuple[dict[str, SourceInput], int, str | None]:
    """The group's inputs with their change feeds and their rows, or why it must recompute.

    The rows are the tick's ``rows_in`` (``auto`` decides with them too); the reason is None
    when the changes were read.

    An expired change is gone: the group then recomputes from the new snapshots. With
    ``on_driver`` False, the change feeds are computed by Spark and no partner is read on
    the driver.
    """
    try:
        inputs, changed_rows = _inputs(readers, plan, group.old or {}, group.new, on_driver)
    except SnapshotExpiredError as error:
        return {}, 0, str(error)
    return inputs, changed_rows, None


def _snapshot_inputs(readers: Mapping[str, SourceReader], plan: ViewPlan,
                     new: Mapping[str, int]) -> dict[str, SourceInput]:
    """Inputs for a full recompute: the sources' snapshots at ``new``, no change feed.

    A recompute reads only the new snapshots: a change feed computed for it would be
    work thrown away (for an initial load, the whole table consolidated and materialized).
    """
    inputs = {}
    for name in plan.sources:
        reader, version = readers[name], new.get(name)
        inputs[name] = SourceInput(
            new=partial(reader.snapshot, version),
            schema_key=reader.schema_key(version) if version is not None else None)
    return inputs


def _recompute(plan: ViewPlan, inputs: Mapping[str, SourceInput]) -> Maintained:
    """A full recompute that keeps no aggregate state (policy ``full``)."""
    return Maintained(recompute(plan, inputs))


def _full_reason(view: ViewConfig, plan: ViewPlan, old: dict[str, int] | None) -> str | None:
    if old is None:
        return "initial load: the sink has no frontier yet"
    if view.refresh == "full":
        return "refresh policy is full"
    if not plan.incremental:
        return plan.reason
    return None


def _large_change_reason(
    view: ViewConfig, readers: Mapping[str, SourceReader], new: Mapping[str, int],
    changed_rows: int,
) -> str | None:
    """Under ``auto``: why a change this large is cheaper to recompute, or None.

    The sources' rows at the ``new`` frontier are counted from table metadata
    (:meth:`SourceReader.row_count`): no Spark job.
    """
    if view.refresh != "auto" or not changed_rows:
        return None
    input_rows = sum(readers[name].row_count(version) for name, version in new.items())
    if changed_rows <= view.full_refresh_ratio * input_rows:
        return None
    share = changed_rows / max(input_rows, 1)
    return (f"the change ({changed_rows} rows) is {share:.0%} of the input ({input_rows} rows), "
            f"above full_refresh_ratio {view.full_refresh_ratio:.0%}")


def _inputs(
    readers: Mapping[str, SourceReader], plan: ViewPlan, old: Mapping[str, int],
    new: Mapping[str, int], on_driver: bool,
) -> tuple[dict[str, SourceInput], int]:
    """Each source's input for the tick, and the rows of their change feeds."""
    inputs, changed_rows = {}, 0
    used = used_columns(plan.query, plan.sources)  # the view reads its change feeds' projection
    for name in plan.sources:
        reader = readers[name]
        before, after = old.get(name), new.get(name)
        changed = after is not None and before != after
        feed = (reader.change_feed(before, after, used[name] or None, in_arrow=on_driver)
                if changed and after is not None else None)
        delta, rows = _delta(feed)
        changed_rows += rows
        inputs[name] = SourceInput(  # snapshots resolved in Spark only if a query reads them
            new=partial(reader.snapshot, after),
            old=partial(reader.snapshot, before) if before is not None else None,
            delta=delta,
            delta_arrow=feed.arrow if feed is not None else None,
            read_arrow=(TickReads(reader, before, after) if on_driver and before is not None
                        and after is not None else None),
            schema_key=reader.schema_key(after) if after is not None else None,
        )
    return inputs, changed_rows


def _delta(feed: ChangeFeed | None) -> tuple[DataFrame | Callable[[], DataFrame] | None, int]:
    """The change feed as the view delta reads it on Spark, and its rows.

    A feed in Arrow is turned into a DataFrame only if a Spark query reads it; one that
    Spark computes is materialized once (unless its reader did), since the delta terms read
    it several times, and counted in the same Spark action.
    """
    if feed is None:
        return None, 0
    if feed.arrow is not None:
        return (lambda: feed.rows), feed.arrow.num_rows
    if feed.checkpointed_rows is not None:
        return feed.rows, feed.checkpointed_rows
    return counted_checkpoint(feed.rows)


def _apply(sinks: ViewSinks, group: _Group, delta: Maintained, plan: ViewPlan,
           committed: list[str], engine: str) -> int:
    """Commit a view delta to the group's sinks; returns its rows (+ and -).

    Where the tick computed the delta decides how every sink commits it, in this one place:
    a delta in Arrow (computed on the driver) is committed from Arrow (pyiceberg, delta-rs);
    one on Spark is materialized once on the executors, then the Iceberg sink collects it
    when small (else MERGEs it with Spark) and the Delta sink commits it with delta-spark
    from the executors. Each sink's kind is appended to ``committed`` once its commit landed;
    each commit records ``engine``, the engine that computed the delta.
    """
    changes: pa.Table | DataFrame
    if delta.arrow is not None:
        changes = delta.arrow
        schema: pa.Schema | StructType = changes.schema.remove(
            changes.schema.get_field_index(WEIGHT))
        rows = changes.num_rows
    else:
        changes, rows = counted_checkpoint(delta.rows)
        schema = changes.drop(WEIGHT).schema
    commit = methodcaller("apply", changes, plan.key, group.new, engine)
    counted(rows)
    _commit(sinks, group, schema, commit, committed)
    return rows


def _replace(sinks: ViewSinks, group: _Group, view: Maintained, committed: list[str]) -> int:
    """Replace the group's sinks' content by the view's rows; returns their number.

    As :func:`_apply`: rows in Arrow are committed from Arrow, rows on Spark from Spark.
    Each sink's kind is appended to ``committed`` once its commit landed.
    """
    content: pa.Table | DataFrame
    if view.arrow is not None:
        content = view.arrow
        schema: pa.Schema | StructType = content.schema
        rows = content.num_rows
    else:
        content, rows = counted_checkpoint(view.rows)
        schema = content.schema
    commit = methodcaller("replace", content, group.new, "spark")
    counted(rows)
    _commit(sinks, group, schema, commit, committed)
    return rows


def _commit(sinks: ViewSinks, group: _Group, schema: pa.Schema | StructType,
            commit: methodcaller, committed: list[str]) -> None:
    """Call ``commit`` on the group's Iceberg sink and Delta sink at once, wait for both.

    The Iceberg table is created with ``schema`` first if missing. The commits run at once
    (:mod:`lakehouse.sink_commits`). Both sink kinds commit a delta by ``apply`` and
    content by ``replace``, from Arrow or Spark rows alike. The kinds whose commit landed
    are appended to ``committed``, even when the other one failed; then its error is
    raised.
    """
    def iceberg(sink: IcebergSink) -> None:
        sink.ensure_table(schema)
        commit(sink)

    calls: list[SinkCommit] = []
    if "iceberg" in group.kinds and sinks.iceberg is not None:
        calls.append(("iceberg", partial(iceberg, sinks.iceberg)))
    if "delta" in group.kinds and sinks.delta is not None:
        calls.append(("delta", partial(commit, sinks.delta)))
    failpoint("before-sink-commits")
    phase("sink commits")
    landed, error = commit_all(calls, on_spark=isinstance(schema, StructType))
    committed.extend(landed)
    if error is not None:
        raise error
    failpoint("after-sink-commits")
