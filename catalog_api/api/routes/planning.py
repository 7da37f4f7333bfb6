"""Scan planning routes: plan, fetch/cancel a plan, fetch a plan task's scan tasks."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Request, Response, status
from fastapi.responses import JSONResponse
from pyiceberg.catalog.rest.scan_planning import (
    FetchScanTasksRequest,
    PlanCompleted,
    ScanTasks,
)
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.typedef import Identifier

from catalog_api.api.routes.credentials import VendorDep
from catalog_api.core.config import CatalogSettings
from catalog_api.credentials import ACCESS_DELEGATION_HEADER, wants_vended_credentials
from catalog_api.deps import ReadableNamespace, StoreDep
from catalog_api.planning import (
    PlanTableScanBody,
    planning_json,
    prepare_scan,
    scan_tasks,
    split_tasks,
)
from catalog_api.scan_plans import PlanResult, ScanPlanRegistry
from catalog_api.store import CatalogStore, check_namespace

router = APIRouter(prefix="/v1", tags=["Catalog API"])

TABLE_PATH = "/namespaces/{namespace}/tables/{table}"
PLAN_PATH = f"{TABLE_PATH}/plan/{{plan_id}}"  # advertised as {plan-id}


async def get_scan_plans(request: Request) -> ScanPlanRegistry:
    """Return the application's scan plan registry."""
    registry: ScanPlanRegistry = request.app.state.scan_plans
    return registry


ScanPlansDep = Annotated[ScanPlanRegistry, Depends(get_scan_plans)]
DelegationHeader = Annotated[str | None, Header(alias=ACCESS_DELEGATION_HEADER)]
PlanId = Annotated[str, Path(description="ID of a planning request (plan-id)")]


def load_pyiceberg_table(store: CatalogStore, identifier: Identifier) -> Table:
    """Load a table as a pyiceberg ``Table`` (metadata and FileIO).

    Raises:
        NoSuchTableError: If the table or its namespace does not exist.
    """
    check_namespace(identifier[:-1], NoSuchTableError)
    return store.catalog.load_table(identifier)


def _with_credentials(
    result: PlanResult, table_location: str, vendor: VendorDep, delegation: str | None
) -> PlanResult:
    if not isinstance(result, PlanCompleted) or not wants_vended_credentials(delegation):
        return result
    credentials = vendor.storage_credentials(table_location)
    return result.model_copy(update={"storage_credentials": credentials or None})


@router.post(f"{TABLE_PATH}/plan", summary="Submit a scan for planning")
def plan_table_scan(
    store: StoreDep,
    plans: ScanPlansDep,
    vendor: VendorDep,
    namespace: ReadableNamespace,
    table: str,
    body: PlanTableScanBody,
    request: Request,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Plan a scan: ``completed`` with file scan tasks or plan tasks, or ``submitted``."""
    identifier = (*namespace, table)
    loaded = load_pyiceberg_table(store, identifier)
    scan = prepare_scan(loaded, body)
    settings: CatalogSettings = request.app.state.settings
    batch = settings.planning.max_files_per_response

    def compute() -> list[ScanTasks]:
        tasks = scan.plan()
        return [
            scan_tasks(part, loaded.metadata, scan.stats_field_ids)
            for part in split_tasks(tasks, batch)
        ]

    run_async = scan.total_data_files >= settings.planning.async_min_data_files
    result = plans.submit(identifier, compute, run_async)
    result = _with_credentials(result, loaded.location(), vendor, access_delegation)
    return JSONResponse(planning_json(result))


@router.get(PLAN_PATH, summary="Fetch the result of scan planning for a plan-id")
def fetch_planning_result(
    store: StoreDep,
    plans: ScanPlansDep,
    vendor: VendorDep,
    namespace: ReadableNamespace,
    table: str,
    plan_id: PlanId,
    access_delegation: DelegationHeader = None,
) -> Response:
    """Answer ``submitted``, ``completed``, ``failed`` or ``cancelled``."""
    identifier = (*namespace, table)
    loaded = load_pyiceberg_table(store, identifier)
    result = plans.fetch(identifier, plan_id)
    result = _with_credentials(result, loaded.location(), vendor, access_delegation)
    return JSONResponse(planning_json(result))


@router.delete(
    PLAN_PATH, status_code=status.HTTP_204_NO_CONTENT, summary="Cancel scan planning for a plan-id"
)
def cancel_planning(
    store: StoreDep, plans: ScanPlansDep, namespace: ReadableNamespace, table: str, plan_id: PlanId
) -> Response:
    """Cancel a plan and release its plan tasks."""
    identifier = (*namespace, table)
    load_pyiceberg_table(store, identifier)
    plans.cancel(identifier, plan_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(f"{TABLE_PATH}/tasks", summary="Fetch the scan tasks of a plan task")
def fetch_scan_tasks(
    store: StoreDep,
    plans: ScanPlansDep,
    namespace: ReadableNamespace,
    table: str,
    body: FetchScanTasksRequest,
) -> Response:
    """Return the file scan tasks (and their delete files) of one plan task."""
    identifier = (*namespace, table)
    load_pyiceberg_table(store, identifier)
    return JSONResponse(planning_json(plans.fetch_tasks(identifier, body.plan_task)))
