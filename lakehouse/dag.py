"""Views defined on other views: the order in which one tick refreshes them.

A view reads another through a ``view:`` source. Refreshing a view first refreshes
every view upstream of it, in topological order, so that each view of a diamond
(A -> B, A -> C, B + C -> D) reflects the same snapshot of A when D is refreshed.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from ivm import referenced_sources
from lakehouse.config import Config, ViewConfig, ViewSource
from lakehouse.errors import ConfigError

__all__ = ["claims", "refresh_order", "upstream_views"]


def upstream_views(config: Config, view: ViewConfig) -> set[str]:
    """The names of the views that ``view`` reads directly."""
    names = referenced_sources(view.sql) & set(config.sources)
    return {source.view for name in names
            if isinstance(source := config.sources[name], ViewSource)}


def refresh_order(config: Config, view: ViewConfig) -> list[ViewConfig]:
    """``view`` and every view upstream of it, upstream first.

    Raises:
        ConfigError: The views read each other in a cycle (key ``views``).
    """
    graph: dict[str, set[str]] = {}
    pending = [view.name]
    while pending:
        name = pending.pop()
        if name not in graph:
            graph[name] = upstream_views(config, config.view(name))
            pending.extend(graph[name])
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise ConfigError(f"views read each other in a cycle: {error.args[1]}",
                          key="views") from None
    return [config.view(name) for name in order]


def claims(config: Config) -> dict[str, frozenset[str]]:
    """The views a tick of each view writes: itself and every view upstream of it.

    Two ticks whose claims meet must not run at once (they would write one table, or
    leave a diamond reflecting two snapshots of a source); the others may.

    Raises:
        ConfigError: The views read each other in a cycle (key ``views``).
    """
    return {view.name: frozenset(v.name for v in refresh_order(config, view))
            for view in config.views}
