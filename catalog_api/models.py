"""Request and response bodies that pyiceberg does not model the way a server needs.

pyiceberg's REST models are written for a client: some keys the spec makes optional are
required there (``location``, ``partition-spec``, ``write-order`` of ``CreateTableRequest``,
``overwrite`` of ``RegisterTableRequest``, ``identifier`` of a single-table commit). The
classes here relax exactly those keys and reuse pyiceberg's types for everything else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    field_validator,
    model_validator,
)
from pyiceberg.catalog.rest import CreateTableRequest, RegisterTableRequest
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableIdentifier
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import AddSchemaUpdate, TableRequirement, TableUpdate
from pyiceberg.typedef import IcebergBaseModel, Identifier
from pyiceberg.types import (
    IcebergType,
    ListType,
    MapType,
    StructType,
    transform_dict_value_to_str,
)

#: Namespace properties: the spec types them ``additionalProperties: {type: string}``.
StringProperties = dict[str, str]
#: Longest namespace property key and value: pyiceberg's ``SqlCatalog`` columns
#: ``property_key VARCHAR(255)`` and ``property_value VARCHAR(1000)``.
MAX_PROPERTY_KEY_CHARS, MAX_PROPERTY_VALUE_CHARS = 255, 1000


def _fits_columns(properties: dict[str, str]) -> dict[str, str]:
    for key, value in properties.items():
        if len(key) > MAX_PROPERTY_KEY_CHARS:
            raise ValueError(f"property keys must be at most {MAX_PROPERTY_KEY_CHARS} characters")
        if len(value) > MAX_PROPERTY_VALUE_CHARS:
            raise ValueError(
                f"property values must be at most {MAX_PROPERTY_VALUE_CHARS} characters"
            )
        if "\x00" in key or "\x00" in value:
            raise ValueError("property keys and values must not contain NUL")
    return properties


#: Namespace properties as the catalog database can store them.
NamespaceProperties = Annotated[StringProperties, AfterValidator(_fits_columns)]


def string_properties(properties: Any) -> dict[str, str]:
    """Convert property values to strings as pyiceberg does, accepting an object only.

    pyiceberg's own validator calls ``.items()`` on whatever it gets, so a list of
    properties became an ``AttributeError`` (500) instead of a validation error (400).

    Raises:
        ValueError: If ``properties`` is not an object, or a value is null.
    """
    if not isinstance(properties, dict):
        raise ValueError("properties must be an object of string values")
    return transform_dict_value_to_str(properties)


def _rebuildable(field_type: IcebergType) -> bool:
    """Whether pyiceberg's schema visitors can rebuild ``field_type``.

    ``ListType.__init__`` takes its element as ``element or data["element_type"]``, and an
    empty struct is falsy (``StructType.__len__``): a list of an empty struct, at any depth,
    cannot be rebuilt (``KeyError: 'element_type'``), as ``new_table_metadata`` does to
    assign fresh field ids.
    """
    if isinstance(field_type, ListType):
        element = field_type.element_type
        empty = isinstance(element, StructType) and not element.fields
        return not empty and _rebuildable(element)
    if isinstance(field_type, MapType):
        return _rebuildable(field_type.key_type) and _rebuildable(field_type.value_type)
    if isinstance(field_type, StructType):
        return all(_rebuildable(field.field_type) for field in field_type.fields)
    return True


def supported_schema(schema: Schema) -> Schema:
    """Refuse a table schema the catalog cannot process (a 400, not a 500 later).

    Raises:
        ValueError: The schema has a list whose element is an empty struct.
    """
    if not _rebuildable(schema.as_struct()):
        raise ValueError("a list whose element is an empty struct is not supported")
    return schema


def _supported_updates(updates: tuple[TableUpdate, ...]) -> tuple[TableUpdate, ...]:
    for update in updates:
        if isinstance(update, AddSchemaUpdate):
            supported_schema(update.schema_)
    return updates


#: A table commit's updates, whose added schemas the catalog can process.
TableUpdates = Annotated[tuple[TableUpdate, ...], AfterValidator(_supported_updates)]


class RequestBody(IcebergBaseModel):
    """Base of request bodies: a value pyiceberg cannot type is a 400, not a 500.

    Some pyiceberg validators raise ``TypeError`` (e.g. a field ``initial-default`` of a type
    it cannot deserialize), ``KeyError`` (a list type whose ``element`` is not a type) or
    ``AttributeError`` (``set-properties`` whose ``updates`` is not an object), which
    pydantic does not turn into a validation error.
    """

    @model_validator(mode="wrap")
    @classmethod
    def _type_errors_are_invalid(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any]
    ) -> Any:
        try:
            return handler(data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"invalid value: {exc!r}") from None


class CreateTableBody(CreateTableRequest, RequestBody):
    """``CreateTableRequest`` with optional ``location``, ``partition-spec``, ``write-order``."""

    location: str | None = Field(default=None)
    partition_spec: PartitionSpec | None = Field(default=None, alias="partition-spec")
    write_order: SortOrder | None = Field(default=None, alias="write-order")

    @field_validator("properties", mode="before")
    def transform_properties_dict_value_to_str(cls, properties: Any) -> dict[str, str]:  # noqa: N805
        """Replace pyiceberg's validator of the same name: a non-object is a 400."""
        return string_properties(properties)

    @field_validator("table_schema")
    @classmethod
    def _supported_schema(cls, schema: Schema) -> Schema:
        return supported_schema(schema)


class RegisterTableBody(RegisterTableRequest):
    """``RegisterTableRequest`` whose ``overwrite`` flag defaults to false."""

    overwrite: bool = False


class UpdateTableBody(RequestBody):
    """Body of ``POST .../tables/{table}``: the identifier is optional (the URL names the table)."""

    identifier: TableIdentifier | None = None
    requirements: tuple[TableRequirement, ...] = Field(default_factory=tuple)
    updates: TableUpdates = Field(default_factory=tuple)


class TableChange(IcebergBaseModel):
    """One table's part of a multi-table transaction (the identifier is required)."""

    identifier: TableIdentifier
    requirements: tuple[TableRequirement, ...] = Field(default_factory=tuple)
    updates: TableUpdates = Field(default_factory=tuple)


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
    properties: NamespaceProperties = Field(default_factory=dict)


class UpdateNamespacePropertiesBody(RequestBody):
    """Body of ``POST /v1/namespaces/{namespace}/properties``."""

    removals: list[str] = Field(default_factory=list)
    updates: NamespaceProperties = Field(default_factory=dict)


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
