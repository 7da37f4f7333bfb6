"""Name rules (catalog_api.names) and location comparisons (catalog_api.locations)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_api.errors import BadRequestError
from catalog_api.locations import check_no_overlap, confined, is_within, outside
from catalog_api.names import check_name, check_namespace, name_problem


@pytest.mark.parametrize("name", ["t", "my.table", "t" * 255, "é" * 127, "a b", "x%2Fy"])
def test_valid_names(name: str) -> None:
    assert name_problem(name) is None
    assert check_name(name) == name


@pytest.mark.parametrize(("name", "rule"), [
    ("", "empty"), (".", "'.'"), ("..", "'..'"), ("a/b", "'/'"), ("a\\b", "'\\'"),
    ("a\x00", "control"), ("\x1f", "control"), ("a\x7f", "control"), ("a\ud800", "surrogate"),
    ("t" * 256, "255 bytes"), ("é" * 128, "255 bytes"),
])
def test_invalid_names_say_which_rule(name: str, rule: str) -> None:
    with pytest.raises(BadRequestError) as raised:
        check_name(name, "View name")
    assert rule in str(raised.value) and str(raised.value).startswith("Invalid view name")
    with pytest.raises(KeyError):  # lookups choose their own error type
        check_name(name, "Table name", KeyError)


def test_namespace_rules() -> None:
    assert check_namespace(["a", "b"]) == ("a", "b")
    for namespace, rule in ((["a.b"], "'.'"), (["  "], "blank"), ([], "empty"),
                            (["a" * 200, "b" * 60], "255 characters"), (["ok", ".."], "'..'")):
        with pytest.raises(BadRequestError) as raised:
            check_namespace(namespace)
        assert rule in str(raised.value)


def test_local_locations_are_compared_as_pyarrow_opens_them(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    assert is_within(f"{root.as_uri()}/ns/t", root.as_uri())
    assert is_within(str(root / "ns" / "t"), root.as_uri())
    assert not is_within(f"{root.as_uri()}/../x", root.as_uri())
    assert not is_within(f"{tmp_path.as_uri()}/other/..%2Fwh/t", root.as_uri())  # raw: outside
    assert not is_within(f"{root.as_uri()}/..%2Fx", root.as_uri())  # decoded: outside
    assert not is_within(f"file://host{root}/t", root.as_uri())
    assert not is_within(f"{root}/t\x00", root.as_uri())


def test_object_store_keys_are_literal() -> None:
    assert is_within("s3a://lake/wh/t", "s3://lake/wh")
    assert not is_within("s3://lake/wh/../x", "s3://lake/wh")
    assert not is_within("s3://lake/other/../wh/t", "s3://lake/wh")
    assert not is_within("s3://lake//wh/t", "s3://lake/wh")
    assert not is_within("s3://lakehouse/wh/t", "s3://lake/wh")
    assert not is_within("s3://lake/wh2/t", "s3://lake/wh")


def test_overlaps_and_confinement() -> None:
    others = ["s3://lake/wh/a/t", "s3://lake/wh/b"]
    check_no_overlap("s3://lake/wh/a/u", others)
    for location in ("s3://lake/wh/a/t", "s3://lake/wh/a/t/x", "s3://lake/wh/a", "s3://lake/wh/b/"):
        with pytest.raises(BadRequestError, match="overlaps"):
            check_no_overlap(location, others)
    files = ["s3://lake/wh/a/t/d/1", "s3://lake/wh/a/t/b/d", "s3://lake/x", "s3://lake/wh/b/1"]
    assert confined(files, "s3://lake/wh/a/t", ["s3://lake/wh/a/t/b"]) == [files[0]]
    assert outside(files, ["s3://lake/wh/a", "s3://lake/wh/b"]) == ["s3://lake/x"]
