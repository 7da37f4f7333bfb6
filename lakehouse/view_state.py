"""Aggregate state kept by the running process between ticks, by view and frontier.

A view maintained by the invertible-aggregate law reads the state of the groups a
change touches instead of the sources. The state is a pure function of the sources
at the view's frontier, so it is kept in memory only: after a restart (or when a
sink's frontier differs from the kept one) the next tick rebuilds it from the
sources' snapshots at that frontier, and exactly-once is not affected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ivm import AggregateState


@dataclass
class ViewStates:
    """The latest aggregate state of each view, tagged with the frontier it reflects."""

    _kept: dict[str, tuple[dict[str, int], AggregateState]] = field(default_factory=dict)

    def get(self, view: str, frontier: Mapping[str, int] | None) -> AggregateState | None:
        """The state of ``view`` at exactly ``frontier``, or None."""
        kept = self._kept.get(view)
        if kept is None or frontier is None or kept[0] != dict(frontier):
            return None
        return kept[1]

    def put(self, view: str, frontier: Mapping[str, int], state: AggregateState | None) -> None:
        """Keep ``state`` as the state of ``view`` at ``frontier`` (None forgets it)."""
        if state is None:
            self._kept.pop(view, None)
        else:
            self._kept[view] = (dict(frontier), state)
