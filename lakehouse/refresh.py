"""One tick of one view: change feeds past the frontier -> view delta -> every sink.

Each sink stores the frontier it reflects in its own commit. Sinks are grouped by
that frontier and each group gets the delta from its own frontier, so a crash
between the Iceberg and the Delta commit is repaired by the next tick, exactly once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from ivm import WEIGHT, NotIncrementalError, SourceInput, ViewPlan, recompute, view_delta
from lakehouse.config import ViewConfig
from lakehouse.errors import RefreshError, SnapshotExpiredError
from lakehouse.failpoints import failpoint
from lakehouse.progress import counted, phase
from lakehouse.sources.base import SourceReader
from lakehouse.spark.arrow import to_arrow
from sinks.delta import DeltaSink
from sinks.iceberg import IcebergSink

Mode = Literal["incremental", "full", "skipped"]


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
    """

    view: str
    mode: Mode
    frontier: dict[str, int]
    rows_in: int = 0
    rows_out: int = 0
    duration_s: float = 0.0
    reason: str | None = None
    sinks: list[str] = field(default_factory=list)


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


def current_frontier(readers: Mapping[str, SourceReader], plan: ViewPlan) -> dict[str, int]:
    """The newest version of every source of ``plan`` (sources without data omitted)."""
    versions = {name: readers[name].current_version() for name in plan.sources}
    return {name: version for name, version in versions.items() if version is not None}


def refresh_view(
    view: ViewConfig, plan: ViewPlan, readers: Mapping[str, SourceReader], sinks: ViewSinks
) -> RefreshResult:
    """Bring every sink of ``view`` to the sources' current versions.

    Raises:
        NotIncrementalError: The refresh policy is ``incremental`` and the plan is not.
        RefreshError: A source or sink failed; nothing of this refresh is committed
            to the sink that failed.
    """
    started = time.perf_counter()
    if view.refresh == "incremental" and not plan.incremental:
        raise NotIncrementalError(plan.reason or "", view=view.name, fragment=plan.root.detail)
    target = current_frontier(readers, plan)
    groups: dict[str, list[str]] = {}
    for kind, frontier in sinks.frontiers().items():
        if frontier != target:
            groups.setdefault(json.dumps(frontier, sort_keys=True), []).append(kind)
    result = RefreshResult(view.name, "skipped", target)
    for encoded, kinds in groups.items():
        _refresh_group(view, plan, readers, sinks, json.loads(encoded), target, kinds, result)
    result.duration_s = time.perf_counter() - started
    return result


def _refresh_group(
    view: ViewConfig, plan: ViewPlan, readers: Mapping[str, SourceReader], sinks: ViewSinks,
    old: dict[str, int] | None, new: dict[str, int], kinds: list[str], result: RefreshResult,
) -> None:
    expired: str | None = None
    phase("read sources", view=view.name)
    try:
        inputs = _inputs(readers, plan, old or {}, new)
    except SnapshotExpiredError as error:  # the change is gone: recompute from the new snapshot
        inputs, expired = _inputs(readers, plan, {}, new), str(error)
    try:
        full_reason = expired or _full_reason(view, plan, old)
        changed_rows = 0
        if full_reason is None:
            changed_rows = sum(i.delta.count() for i in inputs.values() if i.delta is not None)
            full_reason = _large_change_reason(view, inputs, changed_rows)
        if full_reason is None:
            phase("compute view delta")
            delta = view_delta(plan, inputs).persist()
            result.rows_in += changed_rows
            result.rows_out += counted(delta.count())
            _apply(sinks, kinds, delta, plan, new)
            delta.unpersist()
            result.mode = "incremental"
        else:
            phase("compute view", detail=full_reason)
            rows = recompute(plan, inputs).persist()
            result.rows_out += counted(rows.count())
            _replace(sinks, kinds, rows, new)
            rows.unpersist()
            result.mode, result.reason = "full", full_reason
    except RefreshError:
        raise
    except Exception as error:  # a refresh fails as a whole, with its cause attached
        cause = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RefreshError(f"refresh failed: {cause}", view=view.name) from error
    result.sinks += kinds


def _full_reason(view: ViewConfig, plan: ViewPlan, old: dict[str, int] | None) -> str | None:
    if old is None:
        return "initial load: the sink has no frontier yet"
    if view.refresh == "full":
        return "refresh policy is full"
    if not plan.incremental:
        return plan.reason
    return None


def _large_change_reason(
    view: ViewConfig, inputs: Mapping[str, SourceInput], changed_rows: int
) -> str | None:
    """Under ``auto``: why a change this large is cheaper to recompute, or None."""
    if view.refresh != "auto" or changed_rows == 0:
        return None
    input_rows = sum(i.new.count() for i in inputs.values())
    if changed_rows <= view.full_refresh_ratio * input_rows:
        return None
    share = changed_rows / max(input_rows, 1)
    return (f"the change ({changed_rows} rows) is {share:.0%} of the input ({input_rows} rows), "
            f"above full_refresh_ratio {view.full_refresh_ratio:.0%}")


def _inputs(
    readers: Mapping[str, SourceReader], plan: ViewPlan, old: Mapping[str, int],
    new: Mapping[str, int],
) -> dict[str, SourceInput]:
    inputs = {}
    for name in plan.sources:
        reader = readers[name]
        before, after = old.get(name), new.get(name)
        changed = after is not None and before != after
        delta = reader.change_feed(before, after) if changed and after is not None else None
        inputs[name] = SourceInput(
            new=reader.snapshot(after),
            old=reader.snapshot(before) if before is not None else None,
            delta=delta,
        )
    return inputs


def _apply(sinks: ViewSinks, kinds: list[str], delta: DataFrame, plan: ViewPlan,
           frontier: dict[str, int]) -> None:
    failpoint("before-iceberg-commit")
    if "iceberg" in kinds and sinks.iceberg is not None:
        phase("Iceberg commit")
        sinks.iceberg.ensure_table(_data_schema(delta))
        sinks.iceberg.apply(delta, plan.key, frontier)
    failpoint("between-sink-commits")
    if "delta" in kinds and sinks.delta is not None:
        phase("Delta commit")
        sinks.delta.apply(to_arrow(delta), plan.key, frontier)
    failpoint("after-sink-commits")


def _replace(sinks: ViewSinks, kinds: list[str], rows: DataFrame, frontier: dict[str, int]) -> None:
    failpoint("before-iceberg-commit")
    if "iceberg" in kinds and sinks.iceberg is not None:
        phase("Iceberg commit")
        sinks.iceberg.ensure_table(rows.schema)
        sinks.iceberg.replace(rows, frontier)
    failpoint("between-sink-commits")
    if "delta" in kinds and sinks.delta is not None:
        phase("Delta commit")
        sinks.delta.replace(to_arrow(rows), frontier)
    failpoint("after-sink-commits")


def _data_schema(delta: DataFrame) -> StructType:
    return delta.drop(WEIGHT).schema
