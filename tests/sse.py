"""Read Server-Sent Events from a streamed httpx response, within a deadline.

A stream that goes quiet still sends pings, so the client's read timeout never fires:
without a deadline of its own, a test waiting for an event that never comes would hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

DEADLINE_S = 60.0
"""How long a test waits for the events it expects."""


def change_events(lines: Iterator[str], count: int,
                  deadline_s: float = DEADLINE_S) -> list[dict[str, str]]:
    """The next ``count`` ``change`` events of a stream's lines (``event``, ``id``, ``data``).

    Raises:
        AssertionError: The stream ended, or ``deadline_s`` passed, before ``count`` came.
    """
    until = time.monotonic() + deadline_s
    events: list[dict[str, str]] = []
    event: dict[str, str] = {}
    for line in lines:
        if time.monotonic() > until:
            break
        if not line:
            if event.get("event") == "change":
                events.append(event)
                if len(events) == count:
                    return events
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.strip()
    raise AssertionError(f"{len(events)} of {count} change events within {deadline_s} s")


def eventually(ready: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Wait until ``ready()`` is true, polling every 0.1 s.

    Raises:
        AssertionError: ``deadline_s`` passed first (the message says ``what``).
    """
    until = time.monotonic() + deadline_s
    while not ready():
        if time.monotonic() > until:
            raise AssertionError(f"not within {deadline_s} s: {what}")
        time.sleep(0.1)
