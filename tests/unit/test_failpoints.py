"""Failpoints kill the process with SIGKILL at the selected hit, and say where."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.failpoints import ENV, LOG_ENV, failpoint

HITS = ("before-sink-commits", "iceberg-committed", "after-sink-commits") * 3
CHILD = ("import sys\nfrom lakehouse.failpoints import failpoint\n"
         f"for name in {HITS!r}:\n    print(name, flush=True)\n    failpoint(name)\n")


def _run(selection: str, log: Path) -> tuple[int, list[str]]:
    env = {**os.environ, ENV: selection, LOG_ENV: str(log)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, check=False, cwd=Path(__file__).resolve().parents[2])
    return done.returncode, done.stdout.split()


@pytest.mark.parametrize(("selection", "reached", "logged"), [
    ("iceberg-committed", 2, "iceberg-committed 2"),  # the first hit of that name
    ("iceberg-committed@2", 5, "iceberg-committed 5"),
    ("*@7", 7, "before-sink-commits 7"),
    ("nope,*@4", 4, "before-sink-commits 4"),
])
def test_the_selected_hit_kills(tmp_path: Path, selection: str, reached: int,
                                logged: str) -> None:
    code, printed = _run(selection, tmp_path / "log")
    assert code == -signal.SIGKILL
    assert printed == list(HITS[:reached])
    assert (tmp_path / "log").read_text() == logged + "\n"


def test_a_term_entry_sends_sigterm_at_the_selected_hit(tmp_path: Path) -> None:
    code, printed = _run("after-sink-commits@2=term", tmp_path / "log")
    assert code == -signal.SIGTERM  # the child keeps Python's default: SIGTERM ends it
    assert printed == list(HITS[:6])
    assert (tmp_path / "log").read_text() == "after-sink-commits 6\n"


def test_a_count_never_reached_and_no_variable_do_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, printed = _run("*@100", tmp_path / "log")
    assert (code, len(printed)) == (0, len(HITS))
    assert not (tmp_path / "log").exists()
    monkeypatch.delenv(ENV, raising=False)
    failpoint("before-sink-commits")  # this process lives on
