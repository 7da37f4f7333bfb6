"""A fuzz case: a view's SQL and the snapshots its sources go through, and how to draw one.

Snapshot 0 is the initial load; each later snapshot is one tick's change: random inserts,
deletes and updates (a row's non-key values replaced, its key kept) of one or more tables.
Keys stay unique. A case is stored as JSON (:meth:`Case.to_json`), so that a minimized
failure is kept as a regression test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.fuzz.schema import KEYS, TABLES, decode, encode, random_row
from tests.fuzz.views import random_view

__all__ = ["Case", "Snapshot", "random_case"]

Snapshot = dict[str, list[tuple[object, ...]]]
"""Table name -> its rows (tuples in the schema's column order; duplicates allowed)."""


@dataclass(frozen=True)
class Case:
    """A view and its sources' snapshots, one per tick (the first is the initial load).

    Attributes:
        shape: The generator's shape name (:data:`tests.fuzz.views.SHAPES`).
        sql: The view's SQL.
        snapshots: The sources at the initial load, then after each tick.
    """

    shape: str
    sql: str
    snapshots: tuple[Snapshot, ...]

    def to_json(self) -> dict[str, object]:
        """The case as JSON values (:func:`tests.fuzz.schema.encode` for the rows)."""
        return {"shape": self.shape, "sql": self.sql,
                "snapshots": [{t: [encode(t, r) for r in rows] for t, rows in s.items()}
                              for s in self.snapshots]}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Case:
        """The inverse of :meth:`to_json`."""
        snapshots = data["snapshots"]
        assert isinstance(snapshots, list)
        return cls(str(data["shape"]), str(data["sql"]), tuple(
            {t: [decode(t, r) for r in rows] for t, rows in s.items()} for s in snapshots))


def random_case(rnd: random.Random, ticks: int = 4) -> Case:
    """A random view and ``ticks`` random changes of its sources after an initial load."""
    shape, sql = random_view(rnd)
    first: Snapshot = {t: _initial(rnd, t) for t in TABLES}
    snapshots = [first]
    for _ in range(ticks):
        snapshots.append(_changed(rnd, snapshots[-1]))
    return Case(shape, sql, tuple(snapshots))


def _initial(rnd: random.Random, table: str) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for _ in range(rnd.randint(0, 6)):
        _insert(rnd, table, rows)
    return rows


def _insert(rnd: random.Random, table: str, rows: list[tuple[object, ...]]) -> None:
    """Add a random row; a keyed table's takes an unused key (none left: no row)."""
    if table not in KEYS:
        rows.append(random_row(rnd, table))
        return
    used = {row[0] for row in rows}
    free = [k for k in TABLES[table][0].values if k not in used]
    if free:
        rows.append(random_row(rnd, table, key=rnd.choice(free)))


def _changed(rnd: random.Random, snapshot: Snapshot) -> Snapshot:
    """The snapshot after one tick: each table changed with probability one half, at least one."""
    changed = {t: list(rows) for t, rows in snapshot.items()}
    tables = [t for t in TABLES if rnd.random() < 0.5] or [rnd.choice(list(TABLES))]
    for table in tables:
        rows = changed[table]
        for _ in range(rnd.randint(0, 2)):  # deletes
            if rows:
                rows.pop(rnd.randrange(len(rows)))
        for _ in range(rnd.randint(0, 2)):  # updates: new values, the same key
            if rows:
                position = rnd.randrange(len(rows))
                rows[position] = random_row(rnd, table, key=rows[position][0])
        for _ in range(rnd.randint(0, 3)):
            _insert(rnd, table, rows)
    return changed
