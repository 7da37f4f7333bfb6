"""Metrics reports: the spec's ``reportMetrics`` and a lakehouse extension to read them back."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Response, status
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.typedef import Identifier

from catalog_api.deps import MetricsDep, ReadableNamespace, StoreDep
from catalog_api.errors import BadRequestError
from catalog_api.models import ReportMetricsBody
from catalog_api.paging import PageDep, paged_json
from catalog_api.store import CatalogStore

router = APIRouter(prefix="/v1/namespaces/{namespace}/tables/{table}/metrics")

#: OpenAPI tag of endpoints that are not part of the Iceberg REST spec.
EXTENSION_TAG = "Lakehouse extensions (not in the Iceberg REST spec)"


def _existing_table(store: CatalogStore, namespace: Identifier, table: str) -> tuple[str, ...]:
    identifier = (*namespace, table)
    if not store.table_exists(identifier):
        raise NoSuchTableError(f"Table does not exist: {'.'.join(identifier)}")
    return identifier


@router.post(
    "",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Send a metrics report to this endpoint to be processed by the backend",
    tags=["Catalog API"],
    operation_id="reportMetrics",
)
def report_metrics(
    store: StoreDep,
    metrics: MetricsDep,
    namespace: ReadableNamespace,
    table: str,
    body: Annotated[ReportMetricsBody, Body()],
) -> Response:
    """Store a ``scan-report`` or ``commit-report`` of a table (spec 1.11.0 ``reportMetrics``).

    Reports missing a field the spec requires, or of another ``report-type``, get 400.
    """
    identifier = _existing_table(store, namespace, table)
    metrics.add(identifier, body.model_dump(mode="json", by_alias=True, exclude_unset=True))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "",
    summary="[Lakehouse extension] List the stored metrics reports of a table",
    tags=[EXTENSION_TAG],
    operation_id="lakehouseListMetricsReports",
)
def list_metrics_reports(
    store: StoreDep,
    metrics: MetricsDep,
    namespace: ReadableNamespace,
    table: str,
    page: PageDep,
    report_type: Annotated[
        Literal["scan-report", "commit-report"] | None, Query(alias="report-type")
    ] = None,
) -> Response:
    """Return the reports received for a table, oldest first, paginated like the spec's lists.

    Not an Iceberg REST operation: it is not listed in ``GET /v1/config`` ``endpoints``.
    The body is ``{"reports": [{"id", "report-type", "received-at", "report"}, ...],
    "next-page-token": ...}``. 404 ``NoSuchTableException`` when the table does not exist.
    """
    identifier = _existing_table(store, namespace, table)
    cursor = page.cursor
    if cursor is not None and not isinstance(cursor, int):
        raise BadRequestError("pageToken does not belong to this listing")
    fetched = metrics.list(identifier, cursor or 0, page.fetch_limit, report_type)
    reports, next_token = page.cut(fetched, key=lambda report: report.id)
    return paged_json({"reports": [report.to_json() for report in reports]}, next_token)
