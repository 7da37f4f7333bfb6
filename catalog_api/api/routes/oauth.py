"""``POST /v1/oauth/tokens``: the spec's deprecated OAuth2 token endpoint (client credentials).

Kept for clients configured with ``credential=id:secret`` (pyiceberg, Spark, Trino), which
fetch a token here before anything else. The catalog does not check tokens on its other
endpoints: it has no authorization model. ``CatalogSettings.oauth_clients`` restricts which
id/secret pairs get a token; ``None`` (the default) accepts any.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from urllib.parse import parse_qsl, unquote

from fastapi import APIRouter, Request, Response
from pyiceberg.catalog.rest.response import OAuthErrorResponse, TokenResponse

from catalog_api.api.routes.responses import json_response
from catalog_api.core.config import CatalogSettings

router = APIRouter(tags=["OAuth2 API"])

CLIENT_CREDENTIALS = "client_credentials"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

_FORM_BODY = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "required": ["grant_type"],
                "properties": {
                    "grant_type": {"type": "string", "enum": [CLIENT_CREDENTIALS]},
                    "client_id": {"type": "string"},
                    "client_secret": {"type": "string"},
                    "scope": {"type": "string"},
                },
            }
        }
    },
}


class OAuthFailure(Exception):
    """An OAuth2 error answered with the spec's ``OAuthError`` body."""

    def __init__(self, code: int, error: str, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.body = OAuthErrorResponse(error=error, error_description=description)  # type: ignore[arg-type]


def _client(form: dict[str, str], authorization: str | None) -> tuple[str | None, str | None]:
    """Return the client id and secret from the form or an HTTP Basic header (RFC 6749 2.3.1)."""
    if authorization and authorization.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise OAuthFailure(400, "invalid_request", "Malformed Basic credentials") from exc
        client_id, _, secret = decoded.partition(":")
        return unquote(client_id), unquote(secret)
    return form.get("client_id"), form.get("client_secret")


def _check_client(settings: CatalogSettings, client_id: str | None, secret: str | None) -> None:
    if secret is None:
        raise OAuthFailure(400, "invalid_request", "client_secret is required")
    if settings.oauth_clients is None:
        return
    expected = settings.oauth_clients.get(client_id or "")
    if expected is None or not hmac.compare_digest(expected.encode(), secret.encode()):
        raise OAuthFailure(401, "invalid_client", "Unknown client id or wrong secret")


def issue_token(settings: CatalogSettings, form: dict[str, str], authorization: str | None
                ) -> TokenResponse:
    """Exchange client credentials for a bearer token.

    Args:
        settings: Service settings (``oauth_clients``, ``token_lifetime``).
        form: The form fields of the request.
        authorization: The ``Authorization`` header, if any.

    Returns:
        The token response (``token_type`` ``bearer``, ``expires_in`` in seconds).

    Raises:
        OAuthFailure: 400 ``unsupported_grant_type``/``invalid_request`` or
            401 ``invalid_client``.
    """
    grant = form.get("grant_type")
    if grant != CLIENT_CREDENTIALS:
        raise OAuthFailure(400, "unsupported_grant_type", f"Unsupported grant_type {grant!r}")
    _check_client(settings, *_client(form, authorization))
    return TokenResponse(
        access_token=secrets.token_urlsafe(32),
        token_type="bearer",
        expires_in=int(settings.token_lifetime.total_seconds()),
        issued_token_type=ACCESS_TOKEN_TYPE,
        scope=form.get("scope"),
    )


@router.post(
    "/v1/oauth/tokens",
    response_model=TokenResponse,
    summary="Get a token using an OAuth2 flow (DEPRECATED for REMOVAL)",
    operation_id="getToken",
    deprecated=True,
    openapi_extra={"requestBody": _FORM_BODY},
)
async def get_token(request: Request) -> Response:
    """Exchange client credentials for a token (``client_credentials`` grant only).

    Deprecated by the spec (since Iceberg 1.6.0, removal planned in 2.0). Token exchange is
    answered with 400 ``unsupported_grant_type``. Errors use the spec's ``OAuthError`` body.
    """
    settings: CatalogSettings = request.app.state.settings
    form = dict(parse_qsl((await request.body()).decode(errors="replace")))
    try:
        token = issue_token(settings, form, request.headers.get("authorization"))
    except OAuthFailure as failure:
        return json_response(failure.body, failure.code)
    return json_response(token)
