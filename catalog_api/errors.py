"""Errors of the catalog service: one root, each with its HTTP code and Iceberg type name.

They import no web framework, so the store raises them in any process; their translation
into the spec's ``ErrorModel`` responses is :mod:`catalog_api.error_responses`.
"""

from __future__ import annotations


class CatalogError(Exception):
    """Root of the errors the catalog service raises on purpose.

    Attributes:
        code: HTTP status code of the response.
        error_type: Exception type name sent to clients in the ``ErrorModel``.
    """

    code: int = 500
    error_type: str = "InternalServerError"


class BadRequestError(CatalogError):
    """The request is malformed or asks for something invalid (400)."""

    code = 400
    error_type = "BadRequestException"


class NotAuthorizedError(CatalogError):
    """The request carries no valid credentials (401; answered with ``WWW-Authenticate``)."""

    code = 401
    error_type = "NotAuthorizedException"


class ForbiddenError(CatalogError):
    """The caller may not do this: its roles forbid it, or it reaches outside a table (403)."""

    code = 403
    error_type = "ForbiddenException"


class NotFoundError(CatalogError):
    """A resource or route does not exist (404)."""

    code = 404
    error_type = "NotFoundException"


class UnsupportedOperationError(CatalogError):
    """The server does not support the requested operation (406)."""

    code = 406
    error_type = "UnsupportedOperationException"


class UnprocessableEntityError(CatalogError):
    """The request is well formed but contradictory, e.g. a key both set and removed (422)."""

    code = 422
    error_type = "UnprocessableEntityException"


class PayloadTooLargeError(CatalogError):
    """The request body exceeds ``CatalogSettings.max_body_bytes`` (413)."""

    code = 413
    error_type = "PayloadTooLargeException"


class ListenError(CatalogError):
    """The service cannot listen on its address: taken, not this host's, or not allowed.

    Raised when the server starts, before it serves anything; never sent to a client.

    Attributes:
        host: The address asked for.
        port: The port asked for.
        reason: Why the socket could not be bound, e.g. ``address already in use``.
    """

    def __init__(self, host: str, port: int, reason: str):
        self.host = host
        self.port = port
        self.reason = reason
        super().__init__(f"{host}:{port}: {reason}")

    @classmethod
    def from_os_error(cls, host: str, port: int, error: OSError) -> ListenError:
        """The error for a failed ``bind``, its reason from the system's message.

        Args:
            host: The address asked for.
            port: The port asked for.
            error: What ``socket.bind`` (or the name lookup before it) raised.

        Returns:
            The error, e.g. ``127.0.0.1:8181: address already in use``.
        """
        reason = error.strerror or str(error) or type(error).__name__
        return cls(host, port, reason[:1].lower() + reason[1:])
