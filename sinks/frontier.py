"""The frontier: for one view, the source versions it reflects.

Stored in every sink commit (Iceberg snapshot summary, Delta commit info) under
:data:`FRONTIER_KEY`, so a restarted process resumes from what was committed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

Frontier = Mapping[str, int]
"""Source name -> Iceberg snapshot id or Delta version."""

FRONTIER_KEY = "lakehouse.frontier"
"""Snapshot summary / commit info key holding the frontier as JSON."""

REFRESHED_AT_KEY = "lakehouse.refreshed-at-ms"
"""Snapshot summary / commit info key holding the refresh time (ms since epoch)."""

ENGINE_KEY = "lakehouse.engine"
"""Snapshot summary / commit info key naming the engine that computed the commit's rows
(``local`` or ``spark``; absent when the caller did not say)."""


def encode_frontier(frontier: Frontier) -> str:
    """Serialise a frontier as compact JSON with sorted keys."""
    return json.dumps(dict(frontier), sort_keys=True, separators=(",", ":"))


def decode_frontier(text: str | None) -> dict[str, int] | None:
    """Parse a frontier written by :func:`encode_frontier`; None stays None.

    Raises:
        ValueError: ``text`` is not a JSON object of integers.
    """
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, dict) or not all(isinstance(v, int) for v in value.values()):
        raise ValueError(f"not a frontier: {text!r}")
    return {str(k): int(v) for k, v in value.items()}
