"""What every commit of a view's Delta table carries, whichever writer makes it.

Both writers (delta-rs on the in-process path, delta-spark on the Spark path) put the same
things in a commit, so their commits interleave on one table:

* the commit info's ``userMetadata`` (Delta protocol, "Commit Provenance Information"): a
  JSON object of the freshness properties (:func:`sinks.refresh_state.freshness_properties`:
  the frontier, the refresh time, the refresh state);
* an application transaction ``(app_id, version)`` (Delta protocol, "Transaction
  Identifiers"), which Delta itself uses to skip a replayed write: delta-spark drops a write
  whose ``txnVersion`` is not above the one recorded for ``txnAppId``.

The transaction version is the commit's own table version plus one: each commit is made on
the version the sink read (:meth:`sinks.delta.DeltaSink.frontier`), without retries, so it
lands at that version + 1, and the number strictly increases from one commit of the view to
the next without reading the table's transactions back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sinks.frontier import FRONTIER_KEY, REFRESHED_AT_KEY, decode_frontier
from sinks.refresh_state import REFRESH_STATE_KEY

USER_METADATA = "userMetadata"
"""The commit info field holding the freshness properties as a JSON object."""

MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END",
                                    "SET TBLPROPERTIES"})
"""Commit info ``operation`` of the commits that change no row: compaction (``OPTIMIZE``,
its ``add`` and ``remove`` actions all ``dataChange: false``), ``VACUUM`` and table
properties (the log retention maintenance sets), as delta-rs and delta-spark name them.
They carry no frontier; the one before them still holds."""

HISTORY_GROWTH = 8
"""How many times more commits each further read of the log takes when looking for the
latest frontier past maintenance commits (the first reads one: the usual case, a refresh
on top; one maintenance run adds at most four: ``OPTIMIZE``, ``SET TBLPROPERTIES``,
``VACUUM START`` and ``VACUUM END``)."""


@dataclass(frozen=True)
class DeltaCommit:
    """The metadata of one commit of a view's Delta table.

    Attributes:
        properties: The freshness properties (string to string), stored as JSON in the
            commit info's ``userMetadata``.
        app_id: The writer's application id (``txnAppId``).
        version: The application transaction version (``txnVersion``), >= 1.
        create: Whether the commit creates the table (then with the change data feed on).
    """

    properties: Mapping[str, str]
    app_id: str
    version: int
    create: bool

    @property
    def user_metadata(self) -> str:
        """The properties as the JSON object stored in ``userMetadata``."""
        return json.dumps(dict(self.properties), sort_keys=True, separators=(",", ":"))


_PROPERTY_KEYS = (FRONTIER_KEY, REFRESHED_AT_KEY, REFRESH_STATE_KEY)

CREATE_CONFIGURATION = {"delta.enableChangeDataFeed": "true"}
"""Table properties of a view's Delta table, set by the commit that creates it: downstream
readers follow the view through its change data feed."""


def app_transaction_version(base_version: int | None) -> int:
    """The application transaction version of a commit made on ``base_version``.

    Args:
        base_version: The table version the commit is made on; None for the commit that
            creates the table (version 0).

    Returns:
        The commit's own table version + 1 (>= 1).
    """
    return (base_version + 1 if base_version is not None else 0) + 1


def commit_properties(commit_info: Mapping[str, Any]) -> dict[str, str]:
    """The freshness properties a commit carries (``userMetadata``), as a dict.

    Tables written before the properties moved to ``userMetadata`` carry them as top-level
    commit info keys (delta-rs ``custom_metadata``); those are read too.

    Args:
        commit_info: One entry of the table's history (delta-rs ``DeltaTable.history``).

    Returns:
        The properties; empty for a commit made by another writer.
    """
    found = {k: str(commit_info[k]) for k in _PROPERTY_KEYS if k in commit_info}
    text = commit_info.get(USER_METADATA)
    if isinstance(text, str) and text.startswith("{"):
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            found.update({str(k): str(v) for k, v in loaded.items()})
    return found


def commit_frontier(commit_info: Mapping[str, Any]) -> dict[str, int] | None:
    """The frontier a commit carries, or None (a commit not made by a view's sink).

    Raises:
        ValueError: The commit carries a malformed frontier.
    """
    return decode_frontier(commit_properties(commit_info).get(FRONTIER_KEY))


def latest_frontier(history: Callable[[int], Sequence[Mapping[str, Any]]]
                    ) -> dict[str, int] | None:
    """The frontier of the newest commit that carries one, past maintenance commits.

    Walks back from the latest commit over the commits of :data:`MAINTENANCE_OPERATIONS`
    (compaction, vacuum and table properties change no row, so the table still reflects
    the frontier of the refresh before them). Any other commit without a frontier (another
    writer's) ends the walk: the table's content is then unknown.

    Args:
        history: delta-rs ``DeltaTable.history``: the newest ``limit`` commits' infos,
            newest first.

    Returns:
        The frontier; None before the first commit or after another writer's.

    Raises:
        ValueError: A commit carries a malformed frontier.
    """
    limit = 1
    while True:
        commits = history(limit)
        for commit in commits:
            frontier = commit_frontier(commit)
            if frontier is not None or commit.get("operation") not in MAINTENANCE_OPERATIONS:
                return frontier
        if len(commits) < limit:  # the whole log was read
            return None
        limit *= HISTORY_GROWTH
