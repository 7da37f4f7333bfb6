"""Refresh progress: phases reach the installed reporter, and the display shows them."""

from __future__ import annotations

import io

from rich.console import Console

from lakehouse.progress import Phase, counted, phase, reporting
from lakehouse.progress_display import ProgressDisplay, describe


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Phase]] = []

    def phase(self, event: Phase) -> None:
        self.events.append(("phase", event))

    def rows(self, event: Phase) -> None:
        self.events.append(("rows", event))


def _backfill() -> None:
    phase("read sources", view="ns.v")
    phase("compute view", detail="initial load: the sink has no frontier yet")
    assert counted(1200) == 1200
    phase("sink commits")


def test_phases_without_a_reporter_do_nothing() -> None:
    _backfill()  # no error, nothing to see
    assert counted(3) == 3


def test_later_phases_inherit_the_view_detail_and_rows() -> None:
    recorder = Recorder()
    with reporting(recorder):
        _backfill()
        phase("read sources", view="ns.w")  # a new refresh starts afresh
    _backfill()  # outside the block: not reported
    seen = [(kind, e.view, e.name, e.rows, e.detail is not None) for kind, e in recorder.events]
    assert seen == [
        ("phase", "ns.v", "read sources", None, False),
        ("phase", "ns.v", "compute view", None, True),
        ("rows", "ns.v", "compute view", 1200, True),
        ("phase", "ns.v", "sink commits", 1200, True),
        ("phase", "ns.w", "read sources", None, False),
    ]
    assert describe(recorder.events[3][1]) == (
        "sink commits (initial load: the sink has no frontier yet), 1,200 rows")


def test_the_bar_advances_by_phase_on_a_terminal() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with ProgressDisplay(console, {"ns.v": 3}) as display, reporting(display):
        phase("read sources", view="ns.v")
        phase("compute view", detail="initial load")
        counted(7)
        phase("sink commits")
        (task,) = display.progress.tasks
        assert (task.completed, task.total) == (2, 3)
        assert task.description == "sink commits (initial load), 7 rows"
        phase("read sources")  # a second group (a sink left behind): the total grows
        assert (display.progress.tasks[0].completed, display.progress.tasks[0].total) == (3, 6)
        phase("read sources", view="ns.w")  # another view's tick, on another thread
        display.clear(["ns.v"])
        assert [task.fields["view"] for task in display.progress.tasks] == ["ns.w"]
        display.clear(["ns.w"])
        assert display.progress.tasks == []


def test_without_a_terminal_only_full_refreshes_print_lines() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with ProgressDisplay(console, {}) as display, reporting(display):
        phase("read sources", view="ns.inc")
        phase("compute view delta")
        counted(3)
        phase("sink commits")
        display.clear(["ns.inc"])
        _backfill()
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == [
        "ns.v: compute view (initial load: the sink has no frontier yet)",
        "ns.v: compute view (initial load: the sink has no frontier yet), 1,200 rows",
        "ns.v: sink commits (initial load: the sink has no frontier yet), 1,200 rows",
    ]
