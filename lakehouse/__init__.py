"""The lakehouse application: config, Spark, sources, ticks, scheduler, CLI and Python API.

``from lakehouse import Pipeline`` (:mod:`lakehouse.api`) is the Python API; it is imported
on first use, so ``lakehouse.errors`` and the CLI's start do not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakehouse.api import Pipeline, RefreshSummary

__all__ = ["Pipeline", "RefreshSummary"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from lakehouse import api

        return getattr(api, name)
    raise AttributeError(f"module 'lakehouse' has no attribute {name!r}")
