"""FastAPI dependencies: the store and identifiers decoded from the URL."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request
from pyiceberg.typedef import Identifier

from catalog_api.store import CatalogStore

#: Separator of namespace parts in URLs (``%1F`` once URL-encoded), per the REST spec.
NAMESPACE_SEPARATOR = "\x1f"


def get_store(request: Request) -> CatalogStore:
    """Return the ``CatalogStore`` the application was created with."""
    store: CatalogStore = request.app.state.store
    return store


def split_namespace(encoded: str) -> Identifier:
    """Split a URL namespace into its parts.

    Args:
        encoded: The namespace as it appears (already URL-decoded) in a path or query.

    Returns:
        The namespace parts; empty for an empty string.
    """
    if not encoded:
        return ()
    return tuple(encoded.split(NAMESPACE_SEPARATOR))


def namespace_path(
    namespace: Annotated[str, Path(description="Namespace parts separated by %1F")],
) -> Identifier:
    """Decode the ``{namespace}`` path parameter."""
    return split_namespace(namespace)


def parent_query(
    parent: Annotated[
        str | None, Query(description="Parent namespace, parts separated by %1F")
    ] = None,
) -> Identifier:
    """Decode the optional ``parent`` query parameter of list-namespaces."""
    return split_namespace(parent or "")


StoreDep = Annotated[CatalogStore, Depends(get_store)]
NamespaceDep = Annotated[Identifier, Depends(namespace_path)]
ParentDep = Annotated[Identifier, Depends(parent_query)]
