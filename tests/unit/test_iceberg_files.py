"""Which replace snapshots a change feed must read (pure set logic, no table)."""

from __future__ import annotations

from lakehouse.sources.iceberg_files import _close_over_replacements


def test_untouched_compactions_are_left_out() -> None:
    paths = {"d1"}
    _close_over_replacements(paths, [{"a", "b", "ab"}])
    assert paths == {"d1"}


def test_a_touched_compaction_is_read_whole_through_chains() -> None:
    # a+b -> ab, then ab+c -> abc; a later delete touches abc: every file of both is read.
    paths = {"abc"}
    _close_over_replacements(paths, [{"a", "b", "ab"}, {"ab", "c", "abc"}, {"x", "y"}])
    assert paths == {"a", "b", "ab", "c", "abc"}
    # The same when the touched file is an input of the first compaction.
    paths = {"a"}
    _close_over_replacements(paths, [{"ab", "c", "abc"}, {"a", "b", "ab"}])
    assert paths == {"a", "b", "ab", "c", "abc"}
