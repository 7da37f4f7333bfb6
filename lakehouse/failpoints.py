"""Failpoints: named places in a refresh where a test can make the process die.

A crash test sets ``LAKEHOUSE_FAILPOINTS`` to a comma-separated list of entries; the
process kills itself with SIGKILL (no cleanup, as a power cut or OOM kill would) when it
reaches one. An entry is ``NAME`` (die at any hit of that failpoint), ``NAME@N`` (die at
its N-th hit in this process) or ``*@N`` (die at the N-th hit of any failpoint), so a
long-lived process running many refreshes can die at a random one of them. An entry
ending in ``=term`` sends SIGTERM instead, as an orchestrator stopping the process would,
and the refresh goes on (what ``lakehouse run`` does with the ticks in flight). When
``LAKEHOUSE_FAILPOINT_LOG`` names a file, the failpoint and the hit count are appended to
it (and synced) just before dying. Without the variable a failpoint does nothing. The
pattern is that of FreeBSD's fail(9) and TiKV's fail-rs.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

__all__ = ["ENV", "FAILPOINTS", "LOG_ENV", "failpoint"]

ENV = "LAKEHOUSE_FAILPOINTS"
LOG_ENV = "LAKEHOUSE_FAILPOINT_LOG"
FAILPOINTS = ("before-sink-commits", "iceberg-committed", "delta-committed",
              "after-sink-commits")
"""Every failpoint. A refresh reaches the first before its sinks commit, the next two as
each sink's commit lands (they run at once: in either order, and the other sink's commit
may have landed too), the last once both landed."""
ANY = "*"

_hits: Counter[str] = Counter()
_lock = threading.Lock()  # ticks on several threads count their hits one at a time


def failpoint(name: str) -> None:
    """Kill this process with SIGKILL if ``LAKEHOUSE_FAILPOINTS`` selects this hit of ``name``."""
    listed = os.environ.get(ENV)
    if not listed:
        return
    with _lock:
        _hits[name] += 1
        _hits[ANY] += 1
        _act(listed, name)


def _act(listed: str, name: str) -> None:
    """Kill (or SIGTERM) this process if an entry of ``listed`` selects this hit."""
    for entry in listed.split(","):
        selector, _, action = entry.strip().partition("=")
        point, _, count = selector.partition("@")
        if point in (name, ANY) and (not count or _hits[point] == int(count)):
            _log(f"{name} {_hits[ANY]}")
            os.kill(os.getpid(), signal.SIGTERM if action == "term" else signal.SIGKILL)


def _log(line: str) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    with open(path, "a") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())
