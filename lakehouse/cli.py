"""``lakehouse``: run, refresh, suspend, resume, history, status, explain, wait, serve, demo, jars.

The commands live in :mod:`lakehouse.commands`, by subject; importing them registers them
on :data:`app`, the console script's entry point (``lakehouse.cli:app``).
"""

from __future__ import annotations

from lakehouse.commands import service, views
from lakehouse.commands.common import app

__all__ = ["app", "service", "views"]

if __name__ == "__main__":
    app(prog_name="lakehouse")
