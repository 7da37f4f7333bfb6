"""Request bodies and updates of the view endpoints (REST spec 1.11, ``ViewUpdate``).

pyiceberg 0.12 models views (``pyiceberg.view.metadata``) and the create/register/load/list
bodies (``pyiceberg.catalog.rest``) but not view commits. The view updates the spec shares with
tables (assign-uuid, upgrade-format-version, add-schema, set-location, set-properties,
remove-properties) reuse pyiceberg's table update classes; the two view-only updates and the
``assert-view-uuid`` requirement are defined here.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pyiceberg.catalog.rest import CreateViewRequest
from pyiceberg.table import TableIdentifier
from pyiceberg.table.update import (
    AddSchemaUpdate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    UpgradeFormatVersionUpdate,
)
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.view.metadata import ViewVersion

from catalog_api.models import RequestBody, string_properties


class AddViewVersionUpdate(IcebergBaseModel):
    """``add-view-version``: add a version (its ``schema-id`` -1 means the last added schema)."""

    action: Literal["add-view-version"] = Field(default="add-view-version")
    view_version: ViewVersion = Field(alias="view-version")


class SetCurrentViewVersionUpdate(IcebergBaseModel):
    """``set-current-view-version``: make a version current (-1: the last added version)."""

    action: Literal["set-current-view-version"] = Field(default="set-current-view-version")
    view_version_id: int = Field(alias="view-version-id")


ViewUpdate = Annotated[
    AssignUUIDUpdate
    | UpgradeFormatVersionUpdate
    | AddSchemaUpdate
    | SetLocationUpdate
    | SetPropertiesUpdate
    | RemovePropertiesUpdate
    | AddViewVersionUpdate
    | SetCurrentViewVersionUpdate,
    Field(discriminator="action"),
]


class AssertViewUUID(IcebergBaseModel):
    """``assert-view-uuid``: the view's UUID must be ``uuid`` (the only view requirement)."""

    type: Literal["assert-view-uuid"] = Field(default="assert-view-uuid")
    uuid: uuid.UUID


class CommitViewBody(RequestBody):
    """Body of ``POST .../views/{view}`` (``CommitViewRequest``); the URL names the view."""

    identifier: TableIdentifier | None = None
    requirements: tuple[AssertViewUUID, ...] = Field(default_factory=tuple)
    updates: tuple[ViewUpdate, ...]


class CreateViewBody(CreateViewRequest, RequestBody):
    """``CreateViewRequest`` whose ``location`` may be omitted (the server picks one)."""

    location: str | None = Field(default=None)

    @field_validator("properties", mode="before")
    def transform_properties_dict_value_to_str(cls, properties: Any) -> dict[str, str]:  # noqa: N805
        """Replace pyiceberg's validator of the same name: a non-object is a 400."""
        return string_properties(properties)
