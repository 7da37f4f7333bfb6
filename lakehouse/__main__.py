"""``python -m lakehouse``, and the file ``spark-submit`` runs: the ``lakehouse`` CLI.

``spark-submit`` takes a Python file, not a console script: ``spark-submit [options]
<this file> tick VIEW -c lakehouse.yaml`` runs the CLI in the driver it started
(docs/deploy.md). Run as a file, Python puts this package's folder first on ``sys.path``,
where its modules (``config``, ``errors``, ...) would shadow top-level modules of the same
names; that entry is dropped.
"""

import sys
from pathlib import Path

if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

from lakehouse.cli import app  # noqa: E402

if __name__ == "__main__":
    app(prog_name="lakehouse")
