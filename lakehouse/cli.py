"""``lakehouse``: run, refresh, suspend, resume, history, status, explain, wait, serve, demo, jars.

The commands live in :mod:`lakehouse.commands`, by subject; importing them registers them
on :data:`app`, the console script's entry point (``lakehouse.cli:app``).
"""

from __future__ import annotations

import atexit
import gc

from lakehouse.commands import service, views
from lakehouse.commands.common import app

__all__ = ["app", "service", "views"]

# A command's process ends when the command does, and Python's finalization would first
# garbage-collect the whole heap, the imported modules' objects included: about 0.5 s of a
# CLI refresh's 2.5 s. Freezing the heap at exit (gc.freeze: no later collection visits
# it) skips that; the process frees its memory when it exits. Registered here, at the entry
# point's import, the hook runs after every hook registered later (Spark's stop included).
atexit.register(gc.freeze)

if __name__ == "__main__":
    app(prog_name="lakehouse")
