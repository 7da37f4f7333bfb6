"""Failpoints: named places in a refresh where a test can make the process die.

A crash test sets ``LAKEHOUSE_FAILPOINTS`` to a comma-separated list of names; the
process kills itself with SIGKILL (no cleanup, as a power cut or OOM kill would) when it
reaches one. Without the variable a failpoint does nothing. The pattern is that of
FreeBSD's fail(9) and TiKV's fail-rs.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "FAILPOINTS", "failpoint"]

ENV = "LAKEHOUSE_FAILPOINTS"
FAILPOINTS = ("before-iceberg-commit", "between-sink-commits", "after-sink-commits")
"""Every failpoint, in the order a refresh reaches them."""


def failpoint(name: str) -> None:
    """Kill this process with SIGKILL if ``name`` is listed in ``LAKEHOUSE_FAILPOINTS``."""
    listed = os.environ.get(ENV)
    if listed and name in listed.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
