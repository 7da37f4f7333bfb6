"""A refresh's sink commits run at once, and each one's outcome is reported whatever the other's."""

from __future__ import annotations

import threading
import time

import pytest

from lakehouse.sink_commits import commit_all

WAIT_S = 10.0


def test_the_commits_run_at_once_the_last_on_the_calling_thread() -> None:
    both_running = threading.Barrier(2, timeout=WAIT_S)  # broken if they ran one by one
    threads: dict[str, threading.Thread] = {}

    def commit(kind: str) -> None:
        threads[kind] = threading.current_thread()
        both_running.wait()

    landed, error = commit_all([("iceberg", lambda: commit("iceberg")),
                                ("delta", lambda: commit("delta"))], on_spark=False)
    assert (landed, error) == (["iceberg", "delta"], None)
    assert threads["delta"] is threading.current_thread()
    assert threads["iceberg"] is not threading.current_thread()


def test_a_failed_commit_on_the_calling_thread_waits_for_the_other() -> None:
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.3)
        finished.set()

    def failing() -> None:
        raise ValueError("the Delta log moved")

    landed, error = commit_all([("iceberg", slow), ("delta", failing)], on_spark=False)
    assert finished.is_set()  # nothing still runs once commit_all returns
    assert landed == ["iceberg"]
    assert isinstance(error, ValueError) and str(error) == "the Delta log moved"


def test_a_failed_commit_on_a_helper_thread_is_reported_and_the_other_lands() -> None:
    def failing() -> None:
        raise RuntimeError("main moved")

    landed, error = commit_all([("iceberg", failing), ("delta", lambda: None)], on_spark=False)
    assert landed == ["delta"]
    assert isinstance(error, RuntimeError) and str(error) == "main moved"


def test_when_both_fail_the_first_in_order_is_reported() -> None:
    def fail(message: str) -> None:
        raise OSError(message)

    landed, error = commit_all([("iceberg", lambda: fail("first")),
                                ("delta", lambda: fail("second"))], on_spark=False)
    assert landed == []
    assert isinstance(error, OSError) and str(error) == "first"


@pytest.mark.parametrize("kinds", [[], ["delta"]])
def test_one_commit_or_none_runs_on_the_calling_thread(kinds: list[str]) -> None:
    ran: list[threading.Thread] = []
    landed, error = commit_all([(k, lambda: ran.append(threading.current_thread()))
                                for k in kinds], on_spark=False)
    assert (landed, error) == (kinds, None)
    assert ran == [threading.current_thread()] * len(kinds)
