"""View routes (REST spec 1.11): list, create, load, replace, drop, exists, rename, register."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from pyiceberg.catalog.rest import ListViewsResponse, RegisterViewRequest, ViewResponse

from catalog_api.api.routes.responses import json_response
from catalog_api.deps import PrincipalDep, ReadableNamespace, WritableNamespace
from catalog_api.models import RenameTableBody
from catalog_api.paging import PageDep, paged_json
from catalog_api.security import Role
from catalog_api.view_models import CommitViewBody, CreateViewBody
from catalog_api.view_store import ViewStore

router = APIRouter(prefix="/v1", tags=["Catalog API"])

VIEWS_PATH = "/namespaces/{namespace}/views"
VIEW_PATH = f"{VIEWS_PATH}/{{view}}"
NO_CONTENT = status.HTTP_204_NO_CONTENT


async def get_view_store(request: Request) -> ViewStore:
    """Return the application's ``ViewStore``."""
    views: ViewStore = request.app.state.views
    return views


ViewStoreDep = Annotated[ViewStore, Depends(get_view_store)]


@router.get(VIEWS_PATH, response_model=ListViewsResponse, summary="List views")
def list_views(views: ViewStoreDep, namespace: ReadableNamespace, page: PageDep) -> Response:
    """List the views of a namespace; paginated when ``pageToken`` is sent."""
    identifiers, next_token = page.apply(views.list_views(namespace), key=lambda i: i[-1])
    entries = [{"namespace": list(ident[:-1]), "name": ident[-1]} for ident in identifiers]
    return paged_json({"identifiers": entries}, next_token)


@router.post(VIEWS_PATH, response_model=ViewResponse, summary="Create a view")
def create_view(
    views: ViewStoreDep, namespace: WritableNamespace, body: CreateViewBody
) -> Response:
    """Create a view from a schema and its first version."""
    return json_response(views.create_view(namespace, body))


@router.get(VIEW_PATH, response_model=ViewResponse, summary="Load a view")
def load_view(views: ViewStoreDep, namespace: ReadableNamespace, view: str) -> Response:
    """Return the view's metadata location and metadata."""
    return json_response(views.load_view((*namespace, view)))


@router.post(VIEW_PATH, response_model=ViewResponse, summary="Replace a view")
def replace_view(
    views: ViewStoreDep, namespace: WritableNamespace, view: str, body: CommitViewBody
) -> Response:
    """Check the requirements and apply the updates atomically (409 when a requirement fails)."""
    return json_response(views.commit_view((*namespace, view), body.requirements, body.updates))


@router.delete(VIEW_PATH, status_code=NO_CONTENT, summary="Drop a view")
def drop_view(views: ViewStoreDep, namespace: WritableNamespace, view: str) -> Response:
    """Remove a view from the catalog."""
    views.drop_view((*namespace, view))
    return Response(status_code=NO_CONTENT)


@router.head(VIEW_PATH, status_code=NO_CONTENT, summary="Check if a view exists")
def view_exists(views: ViewStoreDep, namespace: ReadableNamespace, view: str) -> Response:
    """Answer 204 when the view exists, 404 otherwise."""
    exists = views.view_exists((*namespace, view))
    return Response(status_code=NO_CONTENT if exists else status.HTTP_404_NOT_FOUND)


@router.post("/views/rename", status_code=NO_CONTENT, summary="Rename a view")
def rename_view(views: ViewStoreDep, principal: PrincipalDep, body: RenameTableBody) -> Response:
    """Rename a view, possibly moving it to another namespace (writer role on both)."""
    source = (*body.source.namespace.root, body.source.name)
    destination = (*body.destination.namespace.root, body.destination.name)
    for identifier in (source, destination):
        principal.require(identifier[:-1], Role.WRITER, "rename view")
    views.rename_view(source, destination)
    return Response(status_code=NO_CONTENT)


@router.post(
    "/namespaces/{namespace}/register-view",
    response_model=ViewResponse,
    summary="Register a view from a metadata file",
)
def register_view(
    views: ViewStoreDep, namespace: WritableNamespace, body: RegisterViewRequest
) -> Response:
    """Register an existing view metadata file under a view name."""
    return json_response(views.register_view(namespace, body.name, body.metadata_location))
