"""The fuzzer's generator and minimizer, without Spark (the runs are in test_fuzz.py)."""

from __future__ import annotations

import json
import random

from ivm import compile_view
from tests.fuzz.cases import Case, random_case
from tests.fuzz.minimize import minimize
from tests.fuzz.schema import KEYS, SCHEMAS, TABLES
from tests.fuzz.views import SHAPES


def test_every_shape_is_drawn_and_compiles_and_a_seed_gives_one_case() -> None:
    shapes = set()
    for seed in range(200):
        case = random_case(random.Random(seed))
        assert case == random_case(random.Random(seed))
        shapes.add(case.shape)
        plan = compile_view("fuzz", case.sql, SCHEMAS, source_keys=KEYS)  # no parse error
        assert plan.incremental or plan.reason, case.sql
    assert shapes == set(SHAPES)


def test_keys_stay_unique_and_cases_read_back_from_json() -> None:
    for seed in range(50):
        case = random_case(random.Random(seed))
        for snapshot in case.snapshots:
            assert set(snapshot) == set(TABLES)
            for table in KEYS:
                keys = [row[0] for row in snapshot[table]]
                assert len(keys) == len(set(keys)) and None not in keys
        again = Case.from_json(json.loads(json.dumps(case.to_json())))
        assert repr(again) == repr(case)  # NaN != NaN, so compared as text


def test_the_minimizer_keeps_only_what_the_failure_needs() -> None:
    """A 'failure' needing one orders row with cust 2 and a WHERE on status."""
    case = random_case(random.Random(7))
    row = (1, 2, "open", None, 1.5, None)
    snapshots = tuple({**s, "orders": [*s["orders"], row]} for s in case.snapshots)
    case = Case("select", "SELECT o.o_id AS c0, o.cust AS c1 FROM orders o "
                "WHERE (o.status = 'open' AND o.cust > 1) OR o.amount > 0", snapshots)

    def fails(candidate: Case) -> bool:
        return "o.status" in candidate.sql and any(
            r[1] == 2 for s in candidate.snapshots for r in s["orders"])

    smallest = minimize(case, fails)
    assert fails(smallest)
    assert smallest.sql == "SELECT o.cust AS c1 FROM orders AS o WHERE o.status = 'open'"
    assert len(smallest.snapshots) <= 2  # a load and at most one tick
    rows = {r for s in smallest.snapshots for t in s.values() for r in t}
    assert len(rows) == 1 and next(iter(rows))[1] == 2
