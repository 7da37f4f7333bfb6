"""Bodies of Apache Polaris's Generic Table API.

Shapes from Polaris's ``spec/polaris-catalog-apis/generic-tables-api.yaml``.

A generic table is a non-Iceberg table (Delta, CSV, ...) the catalog only names: its format,
base location, description and string properties. pyiceberg has no model for it.
"""

from __future__ import annotations

from pydantic import Field
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
    """``CreateGenericTableRequest``: the same fields as ``GenericTable``."""


class LoadGenericTableResponse(IcebergBaseModel):
    """``LoadGenericTableResponse``: the table, and credentials for its location (none here)."""

    table: GenericTable
    storage_credentials: list[StorageCredential] = Field(
        default_factory=list, alias="storage-credentials"
    )
