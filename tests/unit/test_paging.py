"""``catalog_api.paging.paginate``: the spec's pageToken/pageSize rules."""

from __future__ import annotations

import pytest

from catalog_api.errors import BadRequestError
from catalog_api.paging import encode_token, paginate

ITEMS = list("abcdefg")


def test_no_token_returns_everything_without_next_token() -> None:
    assert paginate(ITEMS, None, 2) == (ITEMS, None)


def test_pages_cover_every_item_once() -> None:
    seen: list[str] = []
    token: str | None = ""
    while token is not None:
        page, token = paginate(ITEMS, token, 3)
        assert len(page) <= 3
        seen += page
    assert seen == ITEMS


def test_token_without_size_returns_the_rest() -> None:
    assert paginate(ITEMS, encode_token(5), None) == (["f", "g"], None)


@pytest.mark.parametrize(
    "token", ["garbage!", "b2Zmc2V0Oi0x", "eHl6"], ids=["base64", "neg", "other"]
)
def test_invalid_tokens_are_400(token: str) -> None:
    with pytest.raises(BadRequestError):
        paginate(ITEMS, token, 2)


def test_page_size_below_one_is_400() -> None:
    with pytest.raises(BadRequestError):
        paginate(ITEMS, "", 0)
