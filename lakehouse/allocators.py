"""Native allocator settings for a long-running process (``lakehouse run``, ``serve``).

A refresher allocates from native allocators besides Python's own: glibc's ``malloc``
(used by Python for objects over 512 bytes, and by delta-rs and the other Rust and C
libraries; one arena per thread that allocated, up to eight per core), Arrow's memory
pool (mimalloc by default in pyarrow's wheels) and DuckDB's. Under a source committing
every second, the soak benchmark (docs/benchmarks.md, *Soak*) measured the process's
resident memory growing about 2 MiB a minute for 50 minutes while Python objects and
Arrow's allocated bytes stayed flat: freed memory the allocators kept. Three settings
return it:

- Arrow's jemalloc pool, which purges freed pages after a second (``dirty_decay_ms``);
- at most two glibc arenas, which share freed chunks between threads instead of
  stranding them in an idle thread's arena;
- a fixed glibc mmap threshold. By default glibc raises it to the size of each large
  block freed (up to 32 MiB), so the next large blocks (a table's metadata document,
  a manifest list) come from the arenas, between small long-lived chunks that keep the
  arenas from shrinking. Held at 128 KiB, each large block is unmapped when freed.

Each setting yields to its standard environment variable when the user set one
(``ARROW_DEFAULT_MEMORY_POOL``, ``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``), and is
skipped where unavailable (a pyarrow built without jemalloc, a C library other than
glibc). Source: glibc manual, "Memory Allocation Tunables" and ``mallopt(3)``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa

__all__ = ["ARENA_MAX", "MMAP_THRESHOLD_BYTES", "AllocatorSettings", "configure_allocators"]

log = logging.getLogger(__name__)

ARENA_MAX = 2
"""glibc arenas a long-running process may use (``mallopt(M_ARENA_MAX)``)."""

MMAP_THRESHOLD_BYTES = 128 * 1024
"""Allocations from this size on get pages of their own, unmapped when freed
(``mallopt(M_MMAP_THRESHOLD)``): glibc's initial threshold, held fixed."""

_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
"""``M_MMAP_THRESHOLD`` and ``M_ARENA_MAX`` in glibc's ``malloc.h``."""


@dataclass(frozen=True)
class AllocatorSettings:
    """What :func:`configure_allocators` left in effect.

    Attributes:
        arrow_pool: The backend of Arrow's default memory pool (``jemalloc``, ``mimalloc``,
            ``system``).
        arena_max: The glibc arena limit this call set, or ``None`` when it set none (the
            environment sets it, or the C library is not glibc).
        mmap_threshold_bytes: The fixed glibc mmap threshold this call set, or ``None``
            (the environment sets ``MALLOC_MMAP_THRESHOLD_``, or not glibc).
    """

    arrow_pool: str
    arena_max: int | None
    mmap_threshold_bytes: int | None


def configure_allocators(environ: Mapping[str, str] | None = None) -> AllocatorSettings:
    """Give Arrow the jemalloc pool and bound glibc's arenas, unless the environment chose.

    Call it once, early, before the threads that refresh start: the arena limit binds the
    arenas created after it.

    Args:
        environ: The environment to consult (``os.environ`` when ``None``).

    Returns:
        The settings in effect.
    """
    env = os.environ if environ is None else environ
    if "ARROW_DEFAULT_MEMORY_POOL" not in env:
        _use_jemalloc()
    mallopt = _glibc_mallopt()
    arenas = threshold = None
    if mallopt is not None and "MALLOC_ARENA_MAX" not in env:
        arenas = ARENA_MAX if mallopt(_M_ARENA_MAX, ARENA_MAX) == 1 else None
    if mallopt is not None and "MALLOC_MMAP_THRESHOLD_" not in env:
        ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
        threshold = MMAP_THRESHOLD_BYTES if ok else None
    return AllocatorSettings(pa.default_memory_pool().backend_name, arenas, threshold)


def _use_jemalloc() -> None:
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # pyarrow built without jemalloc
        log.info("pyarrow has no jemalloc pool; Arrow keeps %s",
                 pa.default_memory_pool().backend_name)


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    """The C library's ``mallopt`` if it is glibc, else ``None``."""
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or getattr(libc, "gnu_get_libc_version", None) is None:
        return None
    mallopt: Callable[[int, int], int] = libc.mallopt
    return mallopt
