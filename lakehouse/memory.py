"""The memory this process may use, and giving back what it freed.

Defaults that scale with the machine (``column_cache_bytes``) are fractions of the memory
the process may use: the machine's, or its container's limit when lower. A container's
limit is read from the cgroup files (v2 ``memory.max``, v1 ``memory.limit_in_bytes``):
psutil reports the host's memory, and a cache sized from the host inside a smaller
container would be killed by the kernel's OOM killer.

A long-running process (``lakehouse run``, ``lakehouse serve``) gives the memory its
allocators freed back to the operating system every :data:`RELEASE_EVERY_S`
(:func:`releasing_freed_memory`), and each of ``lakehouse run``'s workers after a tick
(:class:`ReleaseAfterWork`). pyarrow's default pool, mimalloc, keeps freed pages in each
thread's heap and in its arenas for reuse: after four threads each built and dropped 200
arrays of up to 2 MiB, keeping a fifteenth of them, a process held about 1 GiB of RSS for
116 MiB of live arrays; a release from another thread brought it to about 0.4 GiB, and one
from each worker to about 0.3 GiB. glibc's ``malloc_trim`` does the same for the C heap
(Python's large objects, numpy arrays), whose per-thread arenas keep freed chunks too.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import psutil
import pyarrow as pa

__all__ = ["CGROUP_LIMIT_FILES", "RELEASE_EVERY_S", "ReleaseAfterWork", "memory_limit_bytes",
           "release_freed_memory", "releasing_freed_memory"]

_LOG = logging.getLogger(__name__)
T = TypeVar("T")

RELEASE_EVERY_S = 30.0
"""How often :func:`releasing_freed_memory` gives freed memory back (seconds)."""

CGROUP_LIMIT_FILES = (Path("/sys/fs/cgroup/memory.max"),
                      Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
"""Where cgroup v2 and v1 state this process's memory limit (``max`` or a huge number:
none)."""


def memory_limit_bytes(cgroup_files: Sequence[Path] = CGROUP_LIMIT_FILES) -> int:
    """The bytes of memory this process may use.

    Args:
        cgroup_files: Files that may state a limit in bytes; a missing or unreadable file,
            or one holding anything but a number, states none.

    Returns:
        The machine's physical memory (``psutil.virtual_memory().total``), or the lowest
        limit the files state when it is lower.
    """
    limit = int(psutil.virtual_memory().total)
    for path in cgroup_files:
        try:
            stated = path.read_text().strip()
        except OSError:
            continue
        if stated.isdigit():
            limit = min(limit, int(stated))
    return limit


def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` (glibc), or None where it has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_MALLOC_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Give the memory Arrow's default pool and the C heap freed back to the OS.

    Live allocations are untouched: only pages no allocation uses are returned (Arrow's
    ``MemoryPool.release_unused``, then glibc's ``malloc_trim(0)`` where it exists).

    mimalloc's collect (what ``release_unused`` calls) collects the calling thread's heap,
    then purges the arenas all threads' freed pages go back to; it returns at once when
    that thread never allocated from the pool, skipping the purge: one byte is allocated
    (and freed) first, so that a thread of its own can release. The pages another thread's
    heap keeps for reuse stay with it: that thread releases them itself
    (:class:`ReleaseAfterWork`).
    """
    pool = pa.default_memory_pool()
    pa.allocate_buffer(1, memory_pool=pool)  # this thread's heap exists: the collect runs
    pool.release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class ReleaseAfterWork:
    """Gives freed memory back from a worker thread after its work, at most every ``every_s``.

    A worker's mimalloc heap keeps the pages its ticks freed for its next ticks, out of
    reach of a release from another thread: four threads that built and dropped Arrow
    arrays held 381 MiB after a release from another thread and 282 MiB once each had
    released too (116 MiB live). Call it on the worker, after each job.

    Args:
        every_s: Least seconds between two releases by the same thread.
        release: Gives freed memory back (:func:`release_freed_memory`); an error it
            raises is logged, never raised.
        clock: Monotonic seconds (injectable for tests).
    """

    def __init__(self, every_s: float = RELEASE_EVERY_S,
                 release: Callable[[], None] = release_freed_memory,
                 clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.release = release
        self.clock = clock
        self._thread = threading.local()

    def __call__(self) -> None:
        """Release from this thread if it has not for ``every_s`` (or ever)."""
        now_s = self.clock()
        last_s: float | None = getattr(self._thread, "released_s", None)
        if last_s is not None and now_s - last_s < self.every_s:
            return
        self._thread.released_s = now_s
        try:
            self.release()
        except Exception:  # a release that failed costs memory, never the work
            _LOG.warning("freed memory not released", exc_info=True)

    def after(self, job: Callable[[T], object]) -> Callable[[T], None]:
        """``job``, then a release (:meth:`__call__`) on the same thread, whatever it raised."""
        def run(item: T) -> None:
            try:
                job(item)
            finally:
                self()
        return run


@contextmanager
def releasing_freed_memory(every_s: float = RELEASE_EVERY_S,
                           release: Callable[[], None] = release_freed_memory
                           ) -> Iterator[None]:
    """Within, a daemon thread calls ``release`` every ``every_s`` seconds.

    Args:
        every_s: Seconds between two releases.
        release: Gives freed memory back (:func:`release_freed_memory`); an error it
            raises is logged and the next release still runs.

    Yields:
        Nothing; the thread stops (after a release in progress) when the block ends.
    """
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                release()
            except Exception:  # a release that failed costs memory, never the run
                _LOG.warning("freed memory not released", exc_info=True)

    thread = threading.Thread(target=loop, name="release-freed-memory", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
