"""The memory this process may use: the machine's, or its container's limit when lower.

Defaults that scale with the machine (``column_cache_bytes``) are fractions of it. A
container's limit is read from the cgroup files (v2 ``memory.max``, v1
``memory.limit_in_bytes``): psutil reports the host's memory, and a cache sized from the
host inside a smaller container would be killed by the kernel's OOM killer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import psutil

__all__ = ["CGROUP_LIMIT_FILES", "memory_limit_bytes"]

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
