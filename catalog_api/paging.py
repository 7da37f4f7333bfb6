"""Pagination of list endpoints (``pageToken`` / ``pageSize`` / ``next-page-token``).

Implements the spec's ``PageToken`` rules (spec 1.11.0, ``components/schemas/PageToken``):

- no ``pageToken`` in the request: every result in one response, ``next-page-token`` null;
- ``pageToken`` present (an empty value starts a listing): at most ``pageSize`` results
  (the server's default page size when absent, capped at its maximum) and a
  ``next-page-token`` while more results remain, null on the last page.

Tokens are opaque to clients: the URL-safe base64 of the JSON sort key of the last item
returned. Listing resumes strictly after that key, so items created or dropped between two
requests never make a page repeat or skip the others.

Usage in a route::

    def list_things(page: PageDep, ...) -> Response:
        items, token = page.apply(sorted_items, key=lambda item: [*item])
        return paged_json({"things": items}, token)
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request, Response

from catalog_api.errors import BadRequestError

T = TypeVar("T")

#: The response key that carries the token of the next page.
NEXT_PAGE_TOKEN = "next-page-token"


def encode_token(key: Any) -> str:
    """Encode a JSON-serializable sort key as an opaque page token."""
    raw = json.dumps(key, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str) -> Any:
    """Decode a page token made by :func:`encode_token`.

    Raises:
        BadRequestError: If the token was not made by this server.
    """
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        return json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise BadRequestError(f"Invalid pageToken: {token!r}") from exc


@dataclass(frozen=True)
class PageRequest:
    """The pagination a client asked for.

    Attributes:
        token: The ``pageToken`` sent, ``""`` for a first page, None when absent
            (no pagination: everything in one response).
        size: Largest number of items to return (already capped), used when ``token``
            is not None.
    """

    token: str | None
    size: int

    @property
    def cursor(self) -> Any:
        """The sort key of the last item already returned, or None at the start.

        Raises:
            BadRequestError: If the page token is invalid.
        """
        return decode_token(self.token) if self.token else None

    @property
    def fetch_limit(self) -> int | None:
        """How many items a query should fetch after the cursor: one more than a page."""
        return None if self.token is None else self.size + 1

    def cut(self, fetched: Sequence[T], key: Callable[[T], Any]) -> tuple[list[T], str | None]:
        """Make a page of items fetched after the cursor (at most ``fetch_limit`` of them).

        For listings that query their storage directly: fetch ``fetch_limit`` items whose
        key is above ``cursor``, in key order, and pass them here.

        Args:
            fetched: Items following the cursor, sorted by ``key``.
            key: Gives an item's sort key (JSON-serializable).

        Returns:
            The items of this page and the token of the next page (None on the last).
        """
        if self.token is None:
            return list(fetched), None
        page = list(fetched[: self.size])
        more = len(fetched) > self.size
        return page, encode_token(key(page[-1])) if more and page else None

    def apply(self, items: Sequence[T], key: Callable[[T], Any]) -> tuple[list[T], str | None]:
        """Cut one page out of all items, sorted by ``key``.

        Args:
            items: All items, sorted ascending by ``key``.
            key: Gives an item's sort key; must be JSON-serializable and comparable
                (lists of strings, integers, ...).

        Returns:
            The items of this page and the token of the next page (None on the last).

        Raises:
            BadRequestError: If the page token is invalid or of another listing.
        """
        start = 0
        if self.token:
            try:
                start = bisect.bisect_right(items, self.cursor, key=key)
            except TypeError as exc:
                raise BadRequestError(f"pageToken does not belong to this listing: {exc}") from exc
        end = None if self.fetch_limit is None else start + self.fetch_limit
        return self.cut(items[start:end], key)


async def page_request(
    request: Request,
    page_token: Annotated[
        str | None, Query(alias="pageToken", description="Token of the page to return")
    ] = None,
    page_size: Annotated[
        int | None, Query(alias="pageSize", ge=1, description="Upper bound of results")
    ] = None,
) -> PageRequest:
    """Read ``pageToken`` and ``pageSize`` (FastAPI dependency).

    The size defaults to ``CatalogSettings.default_page_size`` and is capped at
    ``CatalogSettings.max_page_size``.
    """
    settings = request.app.state.settings
    size = min(page_size or settings.default_page_size, settings.max_page_size)
    return PageRequest(token=page_token, size=size)


PageDep = Annotated[PageRequest, Depends(page_request)]


def paged_json(body: dict[str, Any], next_token: str | None) -> Response:
    """Serialize a list response with its ``next-page-token`` (explicit null on the last page).

    Args:
        body: JSON-ready response body without the token.
        next_token: Token of the next page, or None.

    Returns:
        A JSON response.
    """
    payload = {**body, NEXT_PAGE_TOKEN: next_token}
    return Response(json.dumps(payload), media_type="application/json")
