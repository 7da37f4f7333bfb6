"""Serialization of pyiceberg models into HTTP responses."""

from __future__ import annotations

from fastapi import Response
from pyiceberg.typedef import IcebergBaseModel


def json_response(model: IcebergBaseModel, status_code: int = 200) -> Response:
    """Serialize a pyiceberg model the way pyiceberg does (aliases, no nulls).

    Args:
        model: A pyiceberg REST model.
        status_code: HTTP status code.

    Returns:
        A JSON response.
    """
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")
