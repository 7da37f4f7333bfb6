"""The catalog's errors as the spec's ``ErrorModel`` responses.

Every failure leaves the service as ``{"error": {"message", "type", "code"}}`` with the
exception type names Iceberg clients dispatch on (``NoSuchTableException``,
``CommitFailedException``, ...). Stack traces are logged, never returned.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.catalog.rest.response import ErrorResponse, ErrorResponseMessage
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchPropertyException,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ValidationError,
    ViewAlreadyExistsError,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from catalog_api.core import API_PREFIX
from catalog_api.errors import CatalogError
from catalog_api.spec_endpoints import find_operation

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 2000

# pyiceberg exception class -> (HTTP code, Iceberg exception type name).
_PYICEBERG_ERRORS: dict[type[Exception], tuple[int, str]] = {
    NoSuchTableError: (404, "NoSuchTableException"),
    NoSuchNamespaceError: (404, "NoSuchNamespaceException"),
    NoSuchViewError: (404, "NoSuchViewException"),
    ViewAlreadyExistsError: (409, "AlreadyExistsException"),
    TableAlreadyExistsError: (409, "AlreadyExistsException"),
    NamespaceAlreadyExistsError: (409, "AlreadyExistsException"),
    NamespaceNotEmptyError: (409, "NamespaceNotEmptyException"),
    CommitFailedException: (409, "CommitFailedException"),
    ValidationError: (400, "BadRequestException"),
    NoSuchPropertyException: (400, "BadRequestException"),
    NotImplementedError: (406, "UnsupportedOperationException"),
}

_HTTP_TYPES = {
    400: "BadRequestException",
    404: "NotFoundException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    413: "PayloadTooLargeException",
}


def error_response(code: int, error_type: str, message: str) -> Response:
    """Build an ``ErrorModel`` JSON response.

    Args:
        code: HTTP status code.
        error_type: Iceberg exception type name, e.g. ``NoSuchTableException``.
        message: Human-readable message (truncated to ``MAX_MESSAGE_CHARS``).

    Returns:
        The response with the spec's error body.
    """
    body = ErrorResponse(
        error=ErrorResponseMessage(message=message[:MAX_MESSAGE_CHARS], type=error_type, code=code)
    )
    return Response(body.model_dump_json(), status_code=code, media_type="application/json")


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _pyiceberg_mapping(exc: Exception) -> tuple[int, str] | None:
    for exc_type, mapping in _PYICEBERG_ERRORS.items():
        if isinstance(exc, exc_type):
            return mapping
    return None


def _describe_validation(errors: list[Any]) -> str:
    parts = []
    for err in errors[:10]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg")))
    return "Invalid request: " + "; ".join(parts)


async def _handle_catalog_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, CatalogError)
    return error_response(exc.code, exc.error_type, _message(exc))


async def _handle_validation(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError | PydanticValidationError)
    return error_response(400, "BadRequestException", _describe_validation(list(exc.errors())))


async def _handle_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code in (404, 405):
        operation = find_operation(request.method, request.url.path.removeprefix(API_PREFIX))
        if operation is not None:  # a spec operation this server does not serve
            message = f"Operation {operation.operation_id} is not supported by this catalog"
            return error_response(406, "UnsupportedOperationException", message)
    error_type = _HTTP_TYPES.get(exc.status_code, "RESTException")
    return error_response(exc.status_code, error_type, str(exc.detail))


async def _handle_any(request: Request, exc: Exception) -> Response:
    mapping = _pyiceberg_mapping(exc)
    if mapping is not None:
        return error_response(mapping[0], mapping[1], _message(exc))
    logger.exception("Unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        500, "InternalServerError", f"Internal server error: {type(exc).__name__}"
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register handlers that turn every exception into an ``ErrorModel`` response.

    Args:
        app: The application to configure.
    """
    app.add_exception_handler(CatalogError, _handle_catalog_error)
    app.add_exception_handler(RequestValidationError, _handle_validation)
    app.add_exception_handler(PydanticValidationError, _handle_validation)
    app.add_exception_handler(StarletteHTTPException, _handle_http)
    for exc_type in _PYICEBERG_ERRORS:
        app.add_exception_handler(exc_type, _handle_any)
    app.add_exception_handler(Exception, _handle_any)
