"""ASGI middleware that authenticates every request before anything else answers it.

It runs outside the ``loadTable`` fast path and the routes, so no answer is given to a
caller it has not identified. The caller's :class:`~catalog_api.security.roles.Principal` is
put in the request's state (``request.state.principal``); routes check its roles. Public:
``GET /v1/config`` (clients read it before they authenticate), the token endpoint, the
liveness probe and the API documentation.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from catalog_api.core import API_PREFIX
from catalog_api.error_responses import error_response
from catalog_api.errors import NotAuthorizedError
from catalog_api.security.authenticator import Authenticator

PRINCIPAL = "principal"
"""The key of the caller in the request's state."""

PUBLIC_ROUTES = frozenset({
    ("GET", f"{API_PREFIX}/v1/config"),
    ("POST", f"{API_PREFIX}/v1/oauth/tokens"),
    ("GET", "/healthz"),
    ("GET", f"{API_PREFIX}/openapi.json"),
    ("GET", f"{API_PREFIX}/docs"),
    ("GET", f"{API_PREFIX}/docs/oauth2-redirect"),
    ("GET", f"{API_PREFIX}/redoc"),
})


def is_public(method: str, path: str) -> bool:
    """Whether a request needs no credentials (``HEAD`` counts as ``GET``)."""
    return ("GET" if method == "HEAD" else method, path) in PUBLIC_ROUTES


class AuthenticationMiddleware:
    """Answer 401 before any route to a caller without a valid token, or record the caller.

    Args:
        app: The wrapped application.
        authenticator: The application's authenticator.
    """

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate an HTTP request, then pass it on."""
        if scope["type"] != "http" or is_public(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        try:
            principal = await self.authenticator.authenticate(header or None)
        except NotAuthorizedError as error:
            response = error_response(error.code, error.error_type, str(error))
            response.headers["WWW-Authenticate"] = 'Bearer realm="iceberg"'
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        await self.app(scope, receive, send)
