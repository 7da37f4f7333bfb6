"""Request and response bodies that pyiceberg does not model the way a server needs.

pyiceberg's REST models are written for a client: some keys the spec makes optional are
required there (``location``, ``partition-spec``, ``write-order`` of ``CreateTableRequest``,
``overwrite`` of ``RegisterTableRequest``, ``identifier`` of a single-table commit). The
classes here relax exactly those keys and reuse pyiceberg's types for everything else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, model_validator
from pyiceberg.catalog.rest import CreateTableRequest, RegisterTableRequest
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import TableIdentifier
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import IcebergBaseModel, Identifier

#: Namespace properties: the spec types them ``additionalProperties: {type: string}``.
StringProperties = dict[str, str]


class RequestBody(IcebergBaseModel):
    """Base of request bodies: a value pyiceberg cannot type is a 400, not a 500.

    Some pyiceberg validators raise ``TypeError`` (e.g. a field ``initial-default`` of a type
    it cannot deserialize) or ``KeyError`` (a list type whose ``element`` is not a type),
    which pydantic does not turn into a validation error.
    """

    @model_validator(mode="wrap")
    @classmethod
    def _type_errors_are_invalid(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any]
    ) -> Any:
        try:
            return handler(data)
        except (TypeError, KeyError) as exc:
            raise ValueError(f"invalid value: {exc!r}") from None


class CreateTableBody(CreateTableRequest, RequestBody):
    """``CreateTableRequest`` with optional ``location``, ``partition-spec``, ``write-order``."""

    location: str | None = Field(default=None)
    partition_spec: PartitionSpec | None = Field(default=None, alias="partition-spec")
    write_order: SortOrder | None = Field(default=None, alias="write-order")


class RegisterTableBody(RegisterTableRequest):
    """``RegisterTableRequest`` whose ``overwrite`` flag defaults to false."""

    overwrite: bool = False


class UpdateTableBody(RequestBody):
    """Body of ``POST .../tables/{table}``: the identifier is optional (the URL names the table)."""

    identifier: TableIdentifier | None = None
    requirements: tuple[TableRequirement, ...] = Field(default_factory=tuple)
    updates: tuple[TableUpdate, ...] = Field(default_factory=tuple)


class TableChange(IcebergBaseModel):
    """One table's part of a multi-table transaction (the identifier is required)."""

    identifier: TableIdentifier
    requirements: tuple[TableRequirement, ...] = Field(default_factory=tuple)
    updates: tuple[TableUpdate, ...] = Field(default_factory=tuple)


class CommitTransactionBody(RequestBody):
    """Body of ``POST /v1/transactions/commit``."""

    table_changes: list[TableChange] = Field(alias="table-changes")


class RenameTableBody(IcebergBaseModel):
    """Body of ``POST /v1/tables/rename``."""

    source: TableIdentifier
    destination: TableIdentifier


class CreateNamespaceBody(RequestBody):
    """Body of ``POST /v1/namespaces``."""

    namespace: Identifier
    properties: StringProperties = Field(default_factory=dict)


class UpdateNamespacePropertiesBody(RequestBody):
    """Body of ``POST /v1/namespaces/{namespace}/properties``."""

    removals: list[str] = Field(default_factory=list)
    updates: StringProperties = Field(default_factory=dict)


class _MetricsReport(BaseModel):
    """Fields common to both metrics reports; unknown keys are kept as sent."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    table_name: str = Field(alias="table-name")
    snapshot_id: int = Field(alias="snapshot-id")
    metrics: dict[str, dict[str, Any]]
    metadata: dict[str, str] = Field(default_factory=dict)


class ScanReportBody(_MetricsReport):
    """A ``ScanReport`` (spec 1.11.0), sent after a client planned a scan."""

    report_type: Literal["scan-report"] = Field(alias="report-type")
    filter: Any
    schema_id: int = Field(alias="schema-id")
    projected_field_ids: list[int] = Field(alias="projected-field-ids")
    projected_field_names: list[str] = Field(alias="projected-field-names")


class CommitReportBody(_MetricsReport):
    """A ``CommitReport`` (spec 1.11.0), sent after a client committed to a table."""

    report_type: Literal["commit-report"] = Field(alias="report-type")
    sequence_number: int = Field(alias="sequence-number")
    operation: str


#: Body of ``POST .../tables/{table}/metrics`` (``ReportMetricsRequest``).
ReportMetricsBody = Annotated[ScanReportBody | CommitReportBody, Field(discriminator="report_type")]


class RemoteSignBody(BaseModel):
    """A ``RemoteSignRequest`` (spec 1.11.0): an S3 request a client wants signed.

    Attributes:
        region: Region the client computed for the request (signing region).
        uri: The full request URI, query included.
        method: HTTP method of the request.
        headers: The request's headers, each with its values.
        properties: Client properties (unused).
        body: The request body, only for requests whose body must be checked before
            signing (S3 ``DeleteObjects``).
        provider: Storage provider; ``s3`` when absent (the only one signed here).
    """

    region: str
    uri: str
    method: Literal["PUT", "GET", "HEAD", "POST", "DELETE", "PATCH", "OPTIONS"]
    headers: dict[str, list[str]]
    properties: StringProperties = Field(default_factory=dict)
    body: str | None = None
    provider: str | None = None
