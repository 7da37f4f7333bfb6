"""A small LRU of serialized ``loadTable`` bodies, keyed by what determines them.

A ``loadTable`` body is a function of the metadata file it is read from (metadata files are
immutable: every commit writes a new one), the ``snapshots`` mode and the server's static
table ``config``. Keyed by ``(metadata_location, snapshots)``, a cached body can never be
stale: a commit, rename or drop changes or removes the catalog row, so the next lookup yields
another key (or a 404) and old entries just age out. Bodies that carry per-request content
(vended credentials, signer settings) are never stored here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class BodyCache:
    """Thread-safe LRU of response bodies bounded by their total size.

    Args:
        max_bytes: Most bytes of bodies kept; 0 disables the cache. A body larger than the
            bound is served but not kept.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bodies: OrderedDict[Hashable, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._bodies)

    def get_or_build(self, key: Hashable, build: Callable[[], bytes]) -> bytes:
        """Return the cached body of ``key``, or build, keep and return it.

        ``build`` runs outside the lock: two concurrent misses of one key both build (the
        results are equal, since the key determines the body) and the second one is kept.

        Args:
            key: What determines the body, e.g. ``(metadata_location, snapshots)``.
            build: Produces the body on a miss; its exceptions propagate, nothing is kept.

        Returns:
            The body bytes.
        """
        with self._lock:
            body = self._bodies.get(key)
            if body is not None:
                self._bodies.move_to_end(key)
                self.hits += 1
                return body
            self.misses += 1
        body = build()
        self._put(key, body)
        return body

    def _put(self, key: Hashable, body: bytes) -> None:
        if len(body) > self.max_bytes:
            return
        with self._lock:
            previous = self._bodies.pop(key, None)
            self._size -= len(previous) if previous is not None else 0
            self._bodies[key] = body
            self._size += len(body)
            while self._size > self.max_bytes:
                _, evicted = self._bodies.popitem(last=False)
                self._size -= len(evicted)
