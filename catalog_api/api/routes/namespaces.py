"""Namespace routes: list, create, load, exists, drop, update properties."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from pyiceberg.catalog.rest import (
    ListNamespaceResponse,
    NamespaceResponse,
    UpdateNamespacePropertiesResponse,
)

from catalog_api.api.routes.responses import json_response
from catalog_api.deps import (
    AdministeredNamespace,
    ParentDep,
    PrincipalDep,
    ReadableNamespace,
    StoreDep,
)
from catalog_api.models import CreateNamespaceBody, UpdateNamespacePropertiesBody
from catalog_api.paging import PageDep, paged_json
from catalog_api.security import Role

router = APIRouter(prefix="/v1/namespaces", tags=["Catalog API"])


@router.get("", response_model=ListNamespaceResponse, summary="List namespaces")
def list_namespaces(
    store: StoreDep, principal: PrincipalDep, parent: ParentDep, page: PageDep
) -> Response:
    """List namespaces one level below ``parent`` (the top level when absent), paginated.

    Only namespaces the caller holds a role on, or holds a role below, are listed; a parent
    it sees nothing of is 403.
    """
    if parent and not principal.sees(parent):
        principal.require(parent, Role.READER, "list namespaces")
    visible = [ns for ns in store.list_namespaces(parent) if principal.sees(ns)]
    namespaces, next_token = page.apply(visible, key=list)
    return paged_json({"namespaces": [list(ns) for ns in namespaces]}, next_token)


@router.post("", response_model=NamespaceResponse, summary="Create a namespace")
def create_namespace(store: StoreDep, principal: PrincipalDep, body: CreateNamespaceBody
                     ) -> Response:
    """Create a namespace with optional properties (admin role on it or an ancestor)."""
    namespace = tuple(body.namespace)
    principal.require(namespace, Role.ADMIN, "create namespace")
    properties = store.create_namespace(namespace, body.properties)
    return json_response(NamespaceResponse(namespace=namespace, properties=properties))


@router.get("/{namespace}", response_model=NamespaceResponse, summary="Load a namespace")
def load_namespace(store: StoreDep, namespace: ReadableNamespace) -> Response:
    """Return the properties of a namespace."""
    properties = store.load_namespace(namespace)
    return json_response(NamespaceResponse(namespace=namespace, properties=properties))


@router.head(
    "/{namespace}", status_code=status.HTTP_204_NO_CONTENT, summary="Check if a namespace exists"
)
def namespace_exists(store: StoreDep, namespace: ReadableNamespace) -> Response:
    """Answer 204 when the namespace exists, 404 otherwise."""
    code = status.HTTP_204_NO_CONTENT if store.namespace_exists(namespace) else 404
    return Response(status_code=code)


@router.delete(
    "/{namespace}", status_code=status.HTTP_204_NO_CONTENT, summary="Drop an empty namespace"
)
def drop_namespace(store: StoreDep, namespace: AdministeredNamespace) -> Response:
    """Drop a namespace that holds no tables and no child namespaces."""
    store.drop_namespace(namespace)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{namespace}/properties",
    response_model=UpdateNamespacePropertiesResponse,
    summary="Set or remove namespace properties",
)
def update_namespace_properties(
    store: StoreDep, namespace: AdministeredNamespace, body: UpdateNamespacePropertiesBody
) -> Response:
    """Set and remove properties; report what was removed, updated and missing."""
    summary = store.update_namespace_properties(namespace, body.removals, body.updates)
    return json_response(
        UpdateNamespacePropertiesResponse(
            removed=summary.removed, updated=summary.updated, missing=summary.missing
        )
    )
