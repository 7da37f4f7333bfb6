"""Native allocator settings of the ``lakehouse`` command's processes.

A refresher allocates from native allocators besides Python's own: glibc's ``malloc``
(Python objects over 512 bytes, and C and C++ libraries' own objects; one arena per
thread that allocated, up to eight per core), Arrow's memory pool (mimalloc by default in
pyarrow's wheels), DuckDB's and delta-rs's (jemalloc, each its own). Under a source
committing every second, the soak benchmark (docs/benchmarks.md, *Soak*) measured
``lakehouse run``'s resident memory growing about 2 MiB a minute for 50 minutes while
Python objects and Arrow's allocated bytes stayed flat: freed memory that glibc's arenas
and mimalloc kept. Three settings return it:

- Arrow's jemalloc pool, which purges freed pages within a second or two
  (``dirty_decay_ms`` and ``muzzy_decay_ms`` of 1000 in pyarrow's build);
- at most two glibc arenas, which share freed chunks between threads instead of
  stranding them in an idle thread's arena;
- a fixed glibc mmap threshold. By default glibc raises it to the size of each large
  block freed (up to 32 MiB), so the next large blocks (a table's metadata document, a
  manifest list) come from the arenas, between small long-lived chunks that keep the
  arenas from shrinking. Held at 128 KiB, a large block gets pages of its own, unmapped
  when it is freed, unless a free chunk of an arena fits it.

Each setting yields to the user's own choice in the environment (``ARROW_DEFAULT_MEMORY_POOL``,
``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``, or ``GLIBC_TUNABLES``), and the glibc
ones are skipped under another C library. Sources: glibc manual, "Memory Allocation
Tunables"; ``mallopt(3)``; Arrow's "Memory Management" (default pool selection).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass

__all__ = ["ARENA_MAX", "ARROW_POOL", "MMAP_THRESHOLD_BYTES", "AllocatorSettings",
           "configure_allocators"]

log = logging.getLogger(__name__)

ARROW_POOL = "jemalloc"
"""Arrow's default memory pool (``ARROW_DEFAULT_MEMORY_POOL``), read when pyarrow loads."""

ARENA_MAX = 2
"""glibc arenas a process may use (``mallopt(M_ARENA_MAX)``)."""

MMAP_THRESHOLD_BYTES = 128 * 1024
"""Blocks from this size on get pages of their own (``mallopt(M_MMAP_THRESHOLD)``):
glibc's initial threshold, held fixed."""

M_MMAP_THRESHOLD = -3
"""``mallopt``'s option for the mmap threshold (glibc's ``malloc.h``)."""

M_ARENA_MAX = -8
"""``mallopt``'s option for the arena limit (glibc's ``malloc.h``)."""


@dataclass(frozen=True)
class AllocatorSettings:
    """What :func:`configure_allocators` left in effect.

    Attributes:
        arrow_pool: ``ARROW_DEFAULT_MEMORY_POOL``: the pool pyarrow takes as it loads.
        arena_max: The glibc arena limit this call set, or ``None`` when it set none (the
            user chose, the C library is not glibc, or ``mallopt`` refused).
        mmap_threshold_bytes: The fixed glibc mmap threshold this call set, or ``None``
            (likewise).
    """

    arrow_pool: str
    arena_max: int | None
    mmap_threshold_bytes: int | None


def configure_allocators(environ: MutableMapping[str, str] | None = None) -> AllocatorSettings:
    """Choose Arrow's jemalloc pool, bound glibc's arenas and fix its mmap threshold.

    Call it before pyarrow is imported (Arrow reads its pool from the environment once,
    and its C++ code keeps that pool) and before other threads start (the arena limit
    binds arenas created later). The ``lakehouse`` command calls it first thing
    (``lakehouse/cli.py``). Child processes inherit the Arrow pool, not the glibc options.

    Args:
        environ: The environment to read the user's choices from and to set
            ``ARROW_DEFAULT_MEMORY_POOL`` in (``os.environ`` when ``None``).

    Returns:
        The settings in effect.
    """
    env = os.environ if environ is None else environ
    pool = env.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_POOL)
    tunables = env.get("GLIBC_TUNABLES", "")
    arenas = threshold = None
    if "MALLOC_ARENA_MAX" not in env and "glibc.malloc.arena_max" not in tunables:
        arenas = ARENA_MAX if _mallopt(M_ARENA_MAX, ARENA_MAX) else None
    if ("MALLOC_MMAP_THRESHOLD_" not in env
            and "glibc.malloc.mmap_threshold" not in tunables):
        fixed = _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        threshold = MMAP_THRESHOLD_BYTES if fixed else None
    settings = AllocatorSettings(pool, arenas, threshold)
    log.info("allocators: %s", settings)
    return settings


def _mallopt(option: int, value: int) -> bool:
    """Call glibc's ``mallopt(option, value)``; ``False`` if it refused or is not glibc."""
    if not _is_glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(option, value) == 1)


def _is_glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):  # a C library without the name
        return False
