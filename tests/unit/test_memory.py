from pathlib import Path

import psutil
import pytest

from ivm import DRIVER_READ_MAX_ROWS
from lakehouse.config import parse_config
from lakehouse.memory import memory_limit_bytes

MACHINE = psutil.virtual_memory().total


def _files(tmp_path: Path, *contents: str) -> list[Path]:
    paths = [tmp_path / f"limit{i}" for i in range(len(contents))]
    for path, text in zip(paths, contents, strict=True):
        path.write_text(text)
    return paths


def test_a_container_limit_below_the_machine_wins(tmp_path: Path) -> None:
    assert memory_limit_bytes(_files(tmp_path, f"{MACHINE // 8}\n")) == MACHINE // 8
    assert memory_limit_bytes(_files(tmp_path, "max\n", f"{MACHINE // 2}")) == MACHINE // 2


@pytest.mark.parametrize("stated", ["max\n", f"{2 * MACHINE}\n", "", "garbage"])
def test_no_limit_or_a_larger_one_leaves_the_machine_memory(tmp_path: Path, stated: str) -> None:
    assert memory_limit_bytes(_files(tmp_path, stated)) == MACHINE


def test_a_missing_file_states_no_limit(tmp_path: Path) -> None:
    assert memory_limit_bytes([tmp_path / "missing"]) == MACHINE


def test_the_column_cache_and_the_driver_read_limit_follow_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("lakehouse.config.memory_limit_bytes", lambda: 8 << 30)
    config = parse_config({})
    assert config.column_cache_bytes == 2 << 30  # a quarter of 8 GiB
    assert config.driver_read_max_rows == 33_554_432  # 2 GiB / 64 bytes a row
    monkeypatch.setattr("lakehouse.config.memory_limit_bytes", lambda: 1 << 30)
    assert parse_config({}).driver_read_max_rows == DRIVER_READ_MAX_ROWS  # the floor
    assert parse_config({"column_cache_bytes": 0}).driver_read_max_rows == DRIVER_READ_MAX_ROWS
    assert parse_config({"column_cache_bytes": 64 << 30}).column_cache_bytes == 64 << 30
