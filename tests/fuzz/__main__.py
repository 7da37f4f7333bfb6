"""Run the fuzzer: ``python -m tests.fuzz --views N --seed S`` (``make fuzz N=...``).

Each failing case is minimized and written to ``tests/fuzz/regressions/`` (or
``--keep DIR``), where ``tests/integration/test_fuzz.py`` replays it; a summary is printed
(views by shape, incremental or not and why, ticks checked, failures). Exits 1 when a case
failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.fuzz.run import REGRESSIONS, fuzz, session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--views", type=int, default=100, help="views to generate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first view")
    parser.add_argument("--keep", type=Path, default=REGRESSIONS,
                        help="where minimized failures are written")
    args = parser.parse_args(argv)
    with session() as spark:
        report = fuzz(spark, range(args.seed, args.seed + args.views), keep=args.keep)
    print(report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
