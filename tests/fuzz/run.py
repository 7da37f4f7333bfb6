"""Run many fuzz cases, minimize the failures and keep them as regression cases."""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse.spark.session import build_spark_session
from tests.fuzz.cases import Case, random_case
from tests.fuzz.check import Outcome, run_case
from tests.fuzz.minimize import minimize

__all__ = ["REGRESSIONS", "Report", "fuzz", "regression_cases", "session"]

REGRESSIONS = Path(__file__).parent / "regressions"
"""Minimized failures, one JSON case per file, replayed by ``tests/integration/test_fuzz.py``."""


@dataclass
class Report:
    """What a fuzz run saw.

    Attributes:
        views: Views generated, by shape.
        incremental: Of those, views whose plan is incremental, by shape.
        reasons: Why the others are not, with their counts.
        ticks: Ticks checked against a full recompute.
        engines: Ticks' engines (each view counted once per engine it ran on).
        failures: Minimized failing cases, with their failure.
    """

    views: Counter[str] = field(default_factory=Counter)
    incremental: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    ticks: int = 0
    engines: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[Case, str]] = field(default_factory=list)

    def add(self, case: Case, outcome: Outcome) -> None:
        """Count one case's outcome."""
        self.views[case.shape] += 1
        if outcome.incremental:
            self.incremental[case.shape] += 1
        else:
            self.reasons[str(outcome.reason).split(":")[0]] += 1
        self.ticks += outcome.ticks
        self.engines.update(outcome.engines)

    def summary(self) -> str:
        """The report as text, one line per fact."""
        lines = [f"views: {sum(self.views.values())}; incremental: "
                 f"{sum(self.incremental.values())}; ticks checked: {self.ticks}; "
                 f"failures: {len(self.failures)}"]
        lines += [f"  {shape}: {self.incremental[shape]} of {n} incremental"
                  for shape, n in sorted(self.views.items())]
        lines += [f"  not incremental ({n}): {reason}" for reason, n in self.reasons.most_common()]
        lines += [f"  views ticked on {engine}: {n}" for engine, n in sorted(self.engines.items())]
        lines += [f"  FAILED {case.sql}\n    {failure}" for case, failure in self.failures]
        return "\n".join(lines)


def fuzz(spark: SparkSession, seeds: Iterable[int], keep: Path | None = None) -> Report:
    """Run the case of each seed; minimize each failure and write it to ``keep``."""
    report = Report()
    for seed in seeds:
        case = random_case(random.Random(seed))
        outcome = run_case(spark, case)
        report.add(case, outcome)
        if outcome.failure is None:
            continue
        smallest = minimize(case, lambda c: run_case(spark, c).failure is not None)
        failure = run_case(spark, smallest).failure or outcome.failure
        report.failures.append((smallest, failure))
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"seed-{seed}.json").write_text(
                json.dumps({**smallest.to_json(), "failure": failure}, indent=1) + "\n")
    return report


def regression_cases(folder: Path = REGRESSIONS) -> list[tuple[str, Case]]:
    """The kept cases: file name and case."""
    return [(path.name, Case.from_json(json.loads(path.read_text())))
            for path in sorted(folder.glob("*.json"))]


@contextmanager
def session() -> Iterator[SparkSession]:
    """A local Spark session for a fuzz run outside pytest (a throwaway warehouse)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as warehouse:
        spark = build_spark_session(app_name="lakehouse-fuzz", catalog_name="lakehouse",
                                    catalog_uri="", catalog_type="hadoop",
                                    warehouse=Path(warehouse).as_uri())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            yield spark
        finally:
            spark.stop()
