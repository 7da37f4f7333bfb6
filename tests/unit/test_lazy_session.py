"""A lazy session starts on first use, and runs a thread's pending settings at that use."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, cast

from lakehouse.spark.lazy import LazySession


def _lazy() -> tuple[LazySession, list[str]]:
    """A lazy session over a plain object, and the log of its starts and settings."""
    log: list[str] = []

    def start() -> Any:
        log.append("start")
        return SimpleNamespace(version="4.0")

    return LazySession(cast(Any, start)), log


def test_pending_settings_wait_for_the_threads_first_use() -> None:
    lazy, log = _lazy()
    lazy.before_use(lambda session: log.append("pool a"))
    lazy.before_use(lambda session: log.append("pool b"))  # replaces a
    assert log == [] and not lazy.started  # nothing runs, nothing starts
    assert lazy.version == "4.0"
    assert lazy.version == "4.0"
    assert log == ["start", "pool b"]  # once, after the start


def test_settings_pending_on_one_thread_never_run_on_another() -> None:
    lazy, log = _lazy()
    lazy.before_use(lambda session: log.append("tick on the local engine"))
    other = threading.Thread(target=lambda: lazy.version)
    other.start()
    other.join()
    assert log == ["start"]
