"""FastAPI dependencies: the store, the caller, and namespaces checked against its roles."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request
from pyiceberg.typedef import Identifier

from catalog_api.errors import NotAuthorizedError
from catalog_api.metrics_store import MetricsStore
from catalog_api.security import PRINCIPAL, Principal, Role
from catalog_api.security.roles import anonymous_admin
from catalog_api.store import CatalogStore

#: Separator of namespace parts in URLs (``%1F`` once URL-encoded), per the REST spec.
NAMESPACE_SEPARATOR = "\x1f"


async def get_store(request: Request) -> CatalogStore:
    """Return the ``CatalogStore`` the application was created with."""
    store: CatalogStore = request.app.state.store
    return store


async def get_metrics(request: Request) -> MetricsStore:
    """Return the application's ``MetricsStore``."""
    metrics: MetricsStore = request.app.state.metrics
    return metrics


def split_namespace(encoded: str, separator: str = NAMESPACE_SEPARATOR) -> Identifier:
    """Split a URL namespace into its parts.

    Both ``separator`` and 0x1F separate parts, as the spec requires of servers that
    advertise another ``namespace-separator``.

    Args:
        encoded: The namespace as it appears (already URL-decoded) in a path or query.
        separator: The advertised separator, URL-decoded.

    Returns:
        The namespace parts; empty for an empty string.
    """
    if not encoded:
        return ()
    if separator != NAMESPACE_SEPARATOR:
        encoded = encoded.replace(separator, NAMESPACE_SEPARATOR)
    return tuple(encoded.split(NAMESPACE_SEPARATOR))


def _separator(request: Request) -> str:
    separator: str = request.app.state.settings.decoded_namespace_separator
    return separator


async def namespace_path(
    request: Request,
    namespace: Annotated[
        str, Path(description="Namespace parts separated by `namespace-separator` (%1F)")
    ],
) -> Identifier:
    """Decode the ``{namespace}`` path parameter."""
    return split_namespace(namespace, _separator(request))


async def parent_query(
    request: Request,
    parent: Annotated[
        str | None,
        Query(description="Parent namespace, parts separated by `namespace-separator` (%1F)"),
    ] = None,
) -> Identifier:
    """Decode the optional ``parent`` query parameter of list-namespaces (empty = absent)."""
    return split_namespace(parent or "", _separator(request))


async def get_principal(request: Request) -> Principal:
    """The caller, as ``AuthenticationMiddleware`` recorded it.

    Raises:
        NotAuthorizedError: No caller is recorded while authentication is on (a route the
            middleware let through as public must not ask for one).
    """
    principal: Principal | None = getattr(request.state, PRINCIPAL, None)
    if principal is not None:
        return principal
    if request.app.state.authenticator.enabled:
        raise NotAuthorizedError("Authentication required: send a bearer token")
    return anonymous_admin()


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def _action(request: Request) -> str:
    """What a request does, from its route's name: ``drop_table`` -> ``drop table``."""
    route = request.scope.get("route")
    return getattr(route, "name", "call this route").replace("_", " ")


def namespace_with_role(role: Role) -> object:
    """A dependency: the ``{namespace}`` path parameter, once the caller holds ``role`` on it.

    Raises (in the dependency):
        ForbiddenError: 403 when the caller's role on the namespace is lower.
    """

    async def checked(request: Request, principal: PrincipalDep,
                      namespace: Annotated[Identifier, Depends(namespace_path)]) -> Identifier:
        principal.require(namespace, role, _action(request))
        return namespace

    return Depends(checked)


StoreDep = Annotated[CatalogStore, Depends(get_store)]
MetricsDep = Annotated[MetricsStore, Depends(get_metrics)]
#: The path's namespace, on which the caller holds at least the reader role.
ReadableNamespace = Annotated[Identifier, namespace_with_role(Role.READER)]
#: The path's namespace, on which the caller holds at least the writer role.
WritableNamespace = Annotated[Identifier, namespace_with_role(Role.WRITER)]
#: The path's namespace, on which the caller holds the admin role.
AdministeredNamespace = Annotated[Identifier, namespace_with_role(Role.ADMIN)]
ParentDep = Annotated[Identifier, Depends(parent_query)]
