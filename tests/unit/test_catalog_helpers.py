"""Pure helpers of the catalog: pagination, spec operations, locations, ETags."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_api import CatalogSettings
from catalog_api.errors import BadRequestError
from catalog_api.etags import matches_if_none_match, table_etag
from catalog_api.locations import check_location, is_within
from catalog_api.paging import PageRequest, decode_token, encode_token
from catalog_api.spec_endpoints import ADVERTISABLE, SPEC_OPERATIONS, find_operation


def test_page_tokens_round_trip() -> None:
    for key in (["a", "b"], 42, "x"):
        assert decode_token(encode_token(key)) == key
    with pytest.raises(BadRequestError):
        decode_token("!!not-base64!!")


def test_paging_walks_every_item_once() -> None:
    items = [(f"n{i:02d}",) for i in range(10)]
    seen: list[tuple[str, ...]] = []
    token: str | None = ""
    while token is not None:
        page, token = PageRequest(token, 3).apply(items, key=list)
        assert len(page) <= 3
        seen.extend(page)
    assert seen == items
    assert PageRequest(None, 3).apply(items, key=list) == (items, None)
    assert PageRequest("", 3).apply([], key=list) == ([], None)


def test_paging_token_of_another_listing_is_400() -> None:
    token = encode_token(["a"])
    with pytest.raises(BadRequestError):
        PageRequest(token, 2).apply([1, 2, 3], key=lambda i: i)


def test_spec_operations_match_served_paths() -> None:
    assert len(SPEC_OPERATIONS) == 32 and len(ADVERTISABLE) == 30
    op = find_operation("post", "/v1/namespaces/a\x1fb/tables/t")
    assert op is not None and op.operation_id == "updateTable" and op.idempotent
    assert find_operation("GET", "/v1/namespaces/a/tables/t/metrics") is None
    assert find_operation("HEAD", "/v1/namespaces/a/views/v").operation_id == "viewExists"  # type: ignore[union-attr]
    assert find_operation("GET", "/v1/namespaces/a/extra/b") is None
    assert not find_operation("GET", "/v1/namespaces").idempotent  # type: ignore[union-attr]


def test_is_within_normalizes(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    assert is_within(str(root / "ns" / "t"), root.as_uri())
    assert is_within((root / "ns").as_uri(), str(root))
    assert not is_within(f"{root.as_uri()}/../other", root.as_uri())
    assert not is_within(str(tmp_path / "wh2"), str(root))
    assert is_within("s3a://bucket/wh/ns/t", "s3://bucket/wh")
    assert not is_within("s3://other/wh/ns/t", "s3://bucket/wh")
    assert not is_within("s3://bucket/wh", f"{root}")


def test_allowed_locations(tmp_path: Path) -> None:
    settings = CatalogSettings(warehouse=str(tmp_path / "wh"), database_url="sqlite://",
                               allowed_locations=["s3://bucket/shared"])
    assert check_location(settings, "s3://bucket/shared/t") == "s3://bucket/shared/t"
    with pytest.raises(BadRequestError, match="outside the warehouse"):
        check_location(settings, "s3://bucket/private/t")


def test_etags() -> None:
    etag = table_etag("file:///wh/t/metadata/1.json")
    assert etag.startswith('"') and etag != table_etag("file:///wh/t/metadata/1.json", "refs")
    assert matches_if_none_match(f'W/{etag}, "x"', etag)
    assert matches_if_none_match("*", etag)
    assert not matches_if_none_match(None, etag) and not matches_if_none_match('"x"', etag)


@pytest.mark.parametrize("separator", ["", "%2E", "/"])
def test_bad_namespace_separators_are_refused(separator: str) -> None:
    with pytest.raises(ValueError, match="namespace_separator"):
        CatalogSettings(warehouse="/tmp/wh", database_url="sqlite://",
                        namespace_separator=separator)
