"""Pagination of list responses (``pageToken`` / ``pageSize``, REST spec ``PageToken``).

Tokens are opaque to clients: the URL-safe base64 of the offset of the next item. As the spec
asks, a request without ``pageToken`` gets every item and no ``next-page-token``; an empty
``pageToken`` starts a paginated listing at the first item.
"""

from __future__ import annotations

import base64
import binascii
from typing import TypeVar

from catalog_api.errors import BadRequestError

T = TypeVar("T")

_TOKEN_PREFIX = "offset:"


def encode_token(offset: int) -> str:
    """Encode the offset of the next item as an opaque page token."""
    return base64.urlsafe_b64encode(f"{_TOKEN_PREFIX}{offset}".encode()).decode("ascii")


def decode_token(page_token: str) -> int:
    """Decode a page token into an offset; the empty token is offset 0.

    Raises:
        BadRequestError: If the token was not issued by :func:`encode_token`.
    """
    if not page_token:
        return 0
    try:
        text = base64.urlsafe_b64decode(page_token.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError) as exc:
        raise BadRequestError(f"Invalid pageToken: {page_token!r}") from exc
    value = text.removeprefix(_TOKEN_PREFIX)
    if not text.startswith(_TOKEN_PREFIX) or not value.isdigit():
        raise BadRequestError(f"Invalid pageToken: {page_token!r}")
    return int(value)


def paginate(
    items: list[T], page_token: str | None, page_size: int | None
) -> tuple[list[T], str | None]:
    """Cut one page out of a sorted list.

    Args:
        items: Every item, in a stable order.
        page_token: ``None`` (no pagination: everything), ``""`` (first page) or a token
            returned by a previous call.
        page_size: Largest page (>= 1); ``None`` means the rest of the items.

    Returns:
        The page, and the token of the next page or ``None`` when this page is the last.

    Raises:
        BadRequestError: If the token is invalid or ``page_size`` is below 1.
    """
    if page_size is not None and page_size < 1:
        raise BadRequestError(f"pageSize must be at least 1, got {page_size}")
    if page_token is None:
        return list(items), None
    start = decode_token(page_token)
    end = len(items) if page_size is None else start + page_size
    next_token = encode_token(end) if end < len(items) else None
    return list(items[start:end]), next_token
