"""View-table maintenance without Spark: its config, and the Delta copy (real delta-rs tables)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable

from lakehouse.config import MaintenanceConfig, parse_config
from lakehouse.errors import ConfigError
from lakehouse.maintenance import (
    LOG_RETENTION,
    NO_CHECKPOINT,
    log_retention,
    maintain_delta,
    small_files,
)
from lakehouse.scheduler import Scheduler
from lakehouse.storage import Folder
from sinks.delta import DeltaSink
from sinks.delta_commit import commit_frontier


@pytest.mark.parametrize(("section", "key", "says"), [
    ({"every": "soon"}, "maintenance.every", "cron expression"),
    ({"retain_for": "forever"}, "maintenance.retain_for", "duration"),
    ({"keep_snapshots": 0}, "maintenance.keep_snapshots", "greater than or equal to 1"),
    ({"compact_min_files": 1}, "maintenance.compact_min_files", "greater than or equal to 2"),
    ({"target_file_size_bytes": 10}, "maintenance.target_file_size_bytes", "greater"),
    ({"delta_vacuum": "maybe"}, "maintenance.delta_vacuum", "boolean"),
    ({"vacuum": True}, "maintenance.vacuum", "Extra inputs"),
])
def test_invalid_maintenance_settings_name_their_key(section: dict[str, object], key: str,
                                                     says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"maintenance": section})
    assert raised.value.key == key and says in str(raised.value), str(raised.value)


def test_maintenance_defaults_cadences_and_off() -> None:
    settings = parse_config({}).maintenance
    assert (settings.every, settings.retain_for_s, settings.keep_snapshots,
            settings.compact_min_files, settings.target_file_size_bytes,
            settings.delta_vacuum) == ("1h", 86400.0, 10, 8, 128 * 1024 * 1024, True)
    views = parse_config({"views": [{"name": "v.a", "sql": "select 1"}]}).views
    assert Scheduler(views, lambda: 1000.0, maintenance_every=settings.every
                     ).next_maintenance_s == {"v.a": 4600.0}
    off = parse_config(yaml.safe_load("maintenance: {every: off}")).maintenance  # YAML: false
    assert off.every is None
    assert Scheduler(views, maintenance_every=off.every).next_maintenance_s == {}
    assert parse_config({"maintenance": {"every": None}}).maintenance.every is None
    cron = MaintenanceConfig(every="0 3 * * *")
    start = datetime(2026, 11, 26, 9, 0).timestamp()
    assert Scheduler(views, lambda: start, maintenance_every=cron.every).next_maintenance_s == {
        "v.a": datetime(2026, 11, 27, 3, 0).timestamp()}
    assert small_files([10, 74, 75, 200], 100) == 2  # below 3/4 of the target


def _rows(uri: str) -> Counter[tuple[object, ...]]:
    return Counter(tuple(r.values()) for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def test_delta_compaction_and_vacuum_keep_the_frontier_and_the_next_commit(
    tmp_path: Path,
) -> None:
    """``OPTIMIZE`` and ``VACUUM`` commit no frontier: the sink reads the one before them."""
    uri = str(tmp_path / "v")
    sink = DeltaSink(uri, app_id="lakehouse:v")
    sink.frontier()
    sink.replace(pa.table({"k": pa.array([0], pa.int64())}), {"s": 0})
    for version in range(1, 6):
        sink.frontier()
        sink.apply(pa.table({"k": pa.array([version], pa.int64()),
                                   "_weight": pa.array([1], pa.int64())}), None, {"s": version})
    rows = _rows(uri)
    settings = MaintenanceConfig(retain_for="0s", keep_snapshots=1, compact_min_files=4)

    folder = Folder.local(Path(uri))
    outcome = maintain_delta(uri, None, settings, "v", folder)
    assert (outcome.files_before, outcome.files_after, outcome.rewritten, outcome.removed) == (
        6, 1, 6, 6)
    operations = [commit["operation"] for commit in DeltaTable(uri).history(4)]
    assert operations == ["VACUUM END", "VACUUM START", "SET TBLPROPERTIES", "OPTIMIZE"]
    assert all(commit_frontier(c) is None for c in DeltaTable(uri).history(4))
    assert _rows(uri) == rows
    assert DeltaSink(uri, app_id="lakehouse:v").frontier() == {"s": 5}
    sink.frontier()  # the next refresh commits on the vacuumed version
    sink.apply(pa.table({"k": pa.array([9], pa.int64()),
                               "_weight": pa.array([1], pa.int64())}), None, {"s": 6})
    assert sink.frontier() == {"s": 6} and _rows(uri) == rows + Counter({(9,): 1})
    transactions = DeltaTable(uri).transaction_version("lakehouse:v")
    assert transactions == DeltaTable(uri).version() + 1  # still the commit's version + 1
    quiet = maintain_delta(uri, None, settings, "v", folder)  # 2 files, and nothing new to
    # vacuum (delta-rs still lists the 6 files deleted before): no commit
    assert (quiet.rewritten, quiet.removed) == (0, 0)
    assert DeltaTable(uri).history(1)[0]["operation"] == "WRITE"
    assert maintain_delta(str(tmp_path / "absent"), None, settings, "v").files_before == 0


def _log_versions(uri: str) -> list[int]:
    return sorted(int(p.stem) for p in (Path(uri) / "_delta_log").glob("*.json"))


def _apply(sink: DeltaSink, key: int, version: int) -> None:
    sink.frontier()
    sink.apply(pa.table({"k": pa.array([key], pa.int64()),
                         "_weight": pa.array([1], pa.int64())}), None, {"s": version})


def test_delta_log_is_kept_for_retain_for_and_never_loses_the_frontier(tmp_path: Path) -> None:
    """The log retention becomes ``retain_for``; maintenance's commits write no checkpoint.

    A checkpoint on every commit (``delta.checkpointInterval`` 1) would otherwise fall on
    the maintenance commit, and the log be cleaned up to it, the refresh commit that holds
    the frontier with it.
    """
    uri = str(tmp_path / "v")
    sink = DeltaSink(uri, app_id="lakehouse:v")
    sink.frontier()
    sink.replace(pa.table({"k": pa.array([0], pa.int64())}), {"s": 0})
    for version in range(1, 4):
        _apply(sink, version, version)
    DeltaTable(uri).alter.set_table_properties({"delta.checkpointInterval": "1"},
                                               post_commithook_properties=NO_CHECKPOINT)
    _apply(sink, 7, 4)  # version 5, checkpointed
    rows = _rows(uri)
    settings = MaintenanceConfig(retain_for="0s", compact_min_files=100)
    maintain_delta(uri, None, settings, "v")
    assert DeltaTable(uri).metadata().configuration[LOG_RETENTION] == log_retention(settings)
    assert _log_versions(uri) == [5, 6]  # cleaned up to the refresh's checkpoint
    assert DeltaTable(uri).history(1)[0]["operation"] == "SET TBLPROPERTIES"
    maintain_delta(uri, None, settings, "v")  # idle view, retention unchanged: no commit
    assert _log_versions(uri) == [5, 6]
    assert DeltaSink(uri, app_id="lakehouse:v").frontier() == {"s": 4} and _rows(uri) == rows
    _apply(sink, 8, 5)
    assert sink.frontier() == {"s": 5}
    daily = MaintenanceConfig(retain_for="24h")
    maintain_delta(uri, None, daily, "v")
    assert DeltaTable(uri).metadata().configuration[LOG_RETENTION] == "interval 86400 seconds"
