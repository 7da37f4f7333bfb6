"""The LRU of serialized loadTable bodies: bounded by bytes, least recently used out first."""

from __future__ import annotations

import pytest

from catalog_api.body_cache import BodyCache


def test_hits_do_not_rebuild_and_eviction_is_least_recently_used() -> None:
    cache = BodyCache(max_bytes=10)
    built: list[str] = []

    def body(key: str, size: int) -> bytes:
        return cache.get_or_build(key, lambda: built.append(key) or key[0].encode() * size)

    assert body("a", 4) == b"aaaa" and body("b", 4) == b"bbbb"
    assert body("a", 4) == b"aaaa" and built == ["a", "b"]  # a hit, and now most recent
    body("c", 4)  # 12 bytes > 10: the least recently used (b) goes
    assert len(cache) == 2 and (cache.hits, cache.misses) == (1, 3)
    body("a", 4)
    body("b", 4)
    assert built == ["a", "b", "c", "b"]


def test_oversized_bodies_are_served_not_kept_and_zero_disables() -> None:
    cache = BodyCache(max_bytes=3)
    assert cache.get_or_build("k", lambda: b"12345") == b"12345"
    assert len(cache) == 0
    off = BodyCache(max_bytes=0)
    assert off.get_or_build("k", lambda: b"x") == b"x" and len(off) == 0


def test_a_failing_build_keeps_nothing() -> None:
    cache = BodyCache(max_bytes=100)

    def fail() -> bytes:
        raise OSError("metadata file gone")

    with pytest.raises(OSError):
        cache.get_or_build("k", fail)
    assert len(cache) == 0 and cache.get_or_build("k", lambda: b"ok") == b"ok"
