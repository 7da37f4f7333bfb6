"""The allocator settings of a long-running process, each checked in a fresh interpreter.

glibc prints one ``Arena N:`` block per arena in ``malloc_stats()``; a thread that first
allocates gets an arena of its own while fewer than the limit exist, so four threads alive
at once make four arenas besides the main one unless the limit is lower. A 1 MiB block is
mapped on its own; once one is freed, glibc's sliding threshold puts the next in an arena
(``mallinfo2().hblks`` counts the mapped blocks) unless the threshold is fixed.
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys

import pytest

CHILD = """
import ctypes, sys, threading
from lakehouse.allocators import configure_allocators

settings = configure_allocators() if sys.argv[1] == "configure" else None
import pyarrow
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks",
                 "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Mallinfo2
libc.free(libc.malloc(1 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(1 << 20)
mapped = libc.mallinfo2().hblks - before
libc.free(block)
print(settings, pyarrow.default_memory_pool().backend_name, mapped)
barrier = threading.Barrier(4)
def allocate():
    barrier.wait()  # all four alive at once: none reuses a finished thread's arena
    kept = [ctypes.create_string_buffer(4096) for _ in range(64)]
    barrier.wait()
threads = [threading.Thread(target=allocate) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
sys.stdout.flush()
libc.malloc_stats()
"""

glibc_only = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not hasattr(ctypes.CDLL(None), "mallinfo2"),
    reason="glibc 2.33 or later (malloc_stats, mallinfo2)")


def _child(mode: str, **env: str) -> tuple[str, int]:
    """The child's settings and mapped blocks after the second 1 MiB block; its arenas."""
    environ = {k: v for k, v in os.environ.items()  # what sets an allocator option
               if not k.startswith(("MALLOC_", "ARROW_DEFAULT_MEMORY_POOL", "GLIBC_TUNABLES",
                                    "LD_PRELOAD"))}
    done = subprocess.run([sys.executable, "-c", CHILD, mode], env=environ | env,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip(), done.stderr.count("Arena ")


@glibc_only
def test_configured_process_uses_two_arenas_a_fixed_threshold_and_arrows_jemalloc() -> None:
    out, arenas = _child("configure")
    assert out == ("AllocatorSettings(arrow_pool='jemalloc', arena_max=2, "
                   "mmap_threshold_bytes=131072) jemalloc 1")
    assert arenas == 2


@glibc_only
def test_unconfigured_process_gives_each_thread_an_arena_and_slides_the_threshold() -> None:
    out, arenas = _child("plain")
    assert out == "None mimalloc 0"  # the checks above could not pass by chance
    assert arenas >= 5


@glibc_only
def test_the_environments_choices_are_kept() -> None:
    out, arenas = _child("configure", ARROW_DEFAULT_MEMORY_POOL="system",
                         MALLOC_ARENA_MAX="3", MALLOC_MMAP_THRESHOLD_=str(4 << 20))
    assert out == ("AllocatorSettings(arrow_pool='system', arena_max=None, "
                   "mmap_threshold_bytes=None) system 0")
    assert arenas == 3


def test_the_lakehouse_command_configures_before_pyarrow_loads() -> None:
    environ = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    child = "import lakehouse.cli, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    done = subprocess.run([sys.executable, "-c", child], env=environ, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "jemalloc"
