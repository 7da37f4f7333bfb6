"""The laws by which plan nodes are maintained."""

from __future__ import annotations

from enum import StrEnum


class Law(StrEnum):
    """How one plan node's delta is derived from its inputs' deltas.

    Source: Gupta and Mumick, "Maintenance of Materialized Views: Problems,
    Techniques, and Applications" (IEEE Data Eng. Bull. 1995), and DBSP
    (Budiu et al., VLDB 2023) for the Z-set formulation.
    """

    CHANGE_FEED = "change feed"
    """A source: its delta is the change feed between two versions."""
    LINEAR = "linear"
    """Filter and project: the operator applied to the delta is the delta of its output."""
    BILINEAR_JOIN = "bilinear join rule"
    """Inner join: d(A join B) = dA join B_old + A_new join dB, over N inputs."""
    INVERTIBLE_AGGREGATE = "invertible aggregate"
    """SUM, COUNT, AVG: the affected groups' kept sums and counts plus the aggregate of
    the input delta (a group disappears when its row count reaches zero)."""
    AFFECTED_KEY_RECOMPUTE = "affected-key recompute"
    """Aggregate/DISTINCT: recompute the groups whose key occurs in the input delta."""
    AFFECTED_RANGE_RECOMPUTE = "affected-range recompute"
    """RANK/DENSE_RANK over the whole input: recompute the rows ordered at or after the
    first order value in the input delta; the ranks before it cannot change
    (:mod:`ivm.rank_ranges`)."""
    TOP_K = "top-K"
    """ORDER BY ... LIMIT K: a buffer of the inner query's best K' > K rows plus the inner
    delta; refilled from the sources only when deletions leave fewer than K
    (:mod:`ivm.top_k_state`)."""
    FULL_RECOMPUTE = "full recompute"
    """The node is recomputed from the sources at the new frontier."""
