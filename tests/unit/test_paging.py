"""``catalog_api.paging.PageRequest``: the spec's pageToken/pageSize rules."""

from __future__ import annotations

import pytest

from catalog_api.errors import BadRequestError
from catalog_api.paging import PageRequest, encode_token

ITEMS = list("abcdefg")


def _key(item: str) -> str:
    return item


def test_no_token_returns_everything_without_next_token() -> None:
    assert PageRequest(None, 2).apply(ITEMS, key=_key) == (ITEMS, None)


def test_pages_cover_every_item_once() -> None:
    seen: list[str] = []
    token: str | None = ""
    while token is not None:
        page, token = PageRequest(token, 3).apply(ITEMS, key=_key)
        assert len(page) <= 3
        seen += page
    assert seen == ITEMS


def test_token_resumes_after_its_key_even_when_items_change() -> None:
    token = encode_token("e")
    assert PageRequest(token, 10).apply(ITEMS, key=_key) == (["f", "g"], None)
    assert PageRequest(token, 10).apply(["a", "ee", "g"], key=_key) == (["ee", "g"], None)


@pytest.mark.parametrize(
    "token", ["garbage!", "b2Zmc2V0Oi0x", "eHl6"], ids=["base64", "not-json", "other"]
)
def test_invalid_tokens_are_400(token: str) -> None:
    with pytest.raises(BadRequestError):
        PageRequest(token, 2).apply(ITEMS, key=_key)
