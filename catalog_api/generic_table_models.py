"""Bodies of Apache Polaris's Generic Table API.

Shapes from Polaris's ``spec/polaris-catalog-apis/generic-tables-api.yaml``.

A generic table is a non-Iceberg table (Delta, CSV, ...) the catalog only names: its format,
base location, description and string properties. pyiceberg has no model for it.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pyiceberg.catalog.rest.scan_planning import StorageCredential
from pyiceberg.typedef import IcebergBaseModel


class GenericTable(IcebergBaseModel):
    """``GenericTable``: name and format are required; ``base-location`` holds all its files."""

    name: str = Field(min_length=1)
    format: str = Field(min_length=1)
    base_location: str | None = Field(default=None, alias="base-location")
    doc: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)


class CreateGenericTableRequest(GenericTable):
    """``CreateGenericTableRequest``: the same fields as ``GenericTable``.

    The name is checked by :mod:`catalog_api.names` (its message names the broken rule);
    ``format`` must fit its ``VARCHAR(255)`` column and, like ``doc``, hold no NUL (a
    PostgreSQL text cannot).
    """

    name: str
    format: str = Field(min_length=1, max_length=255)

    @field_validator("format", "doc")
    @classmethod
    def _without_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("must not contain NUL")
        return value


class LoadGenericTableResponse(IcebergBaseModel):
    """``LoadGenericTableResponse``: the table, and credentials for its location (none here)."""

    table: GenericTable
    storage_credentials: list[StorageCredential] = Field(
        default_factory=list, alias="storage-credentials"
    )
