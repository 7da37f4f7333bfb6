"""``POST /v1/oauth/tokens``: the spec's (deprecated) OAuth2 token endpoint.

Clients configured with ``credential=id:secret`` (pyiceberg, Spark, Trino, DuckDB) fetch a
token here before anything else. Two grants are served:

- ``client_credentials`` (RFC 6749 4.4): the client id and secret, in the form or an HTTP
  Basic header, are checked against the configured clients' Argon2 hashes. Wrong secrets
  are throttled per client id and per address (429 with ``Retry-After``).
- token exchange (RFC 8693) of a valid token of this catalog for a fresh one: the Java
  client refreshes its token this way before it expires.

Without auth (``CatalogSettings.auth.enabled`` false) and with no client configured, any id
and secret gets a token, so that clients configured with credentials work against the open
embedded catalog. Secrets are never logged.
"""

from __future__ import annotations

import base64
import binascii
import time
from urllib.parse import parse_qsl, unquote

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from pyiceberg.catalog.rest.response import OAuthErrorResponse, TokenResponse

from catalog_api.api.routes.responses import json_response
from catalog_api.errors import CatalogError
from catalog_api.security import Authenticator
from catalog_api.security.tokens import VerifiedToken

router = APIRouter(tags=["OAuth2 API"])

CLIENT_CREDENTIALS = "client_credentials"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

_FORM_BODY = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "required": ["grant_type"],
                "properties": {
                    "grant_type": {"type": "string",
                                   "enum": [CLIENT_CREDENTIALS, TOKEN_EXCHANGE]},
                    "client_id": {"type": "string"},
                    "client_secret": {"type": "string"},
                    "scope": {"type": "string"},
                    "subject_token": {"type": "string"},
                    "subject_token_type": {"type": "string"},
                },
            }
        }
    },
}


class OAuthFailure(CatalogError):
    """An OAuth2 error answered with the spec's ``OAuthError`` body.

    Attributes:
        code: HTTP status (400, 401 or 429).
        body: The ``OAuthError`` body.
        retry_after_s: ``Retry-After`` of a 429, in seconds.
    """

    def __init__(self, code: int, error: str, description: str,
                 retry_after_s: int | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.body = OAuthErrorResponse(error=error, error_description=description)  # type: ignore[arg-type]
        self.retry_after_s = retry_after_s


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


def _open(authenticator: Authenticator) -> bool:
    """Whether any id and secret get a token: no auth, and no client configured."""
    return not authenticator.enabled and not authenticator.settings.clients


async def _client_credentials(authenticator: Authenticator, form: dict[str, str],
                              authorization: str | None, address: str | None) -> str:
    """The client id whose secret the request proves.

    Raises:
        OAuthFailure: 400 without a secret, 429 while locked out, 401 for a wrong secret.
    """
    client_id, secret = _client(form, authorization)
    if not client_id or secret is None:
        raise OAuthFailure(400, "invalid_request", "client_id and client_secret are required")
    if _open(authenticator):
        return client_id
    async with authenticator.secret_checks:  # the lockout's count is current in here
        wait_s = authenticator.lockout.retry_after_s(client_id, address)
        if wait_s is not None:
            raise OAuthFailure(429, "invalid_client", "Too many wrong secrets; retry later",
                               wait_s)
        if not await anyio.to_thread.run_sync(authenticator.check_secret, client_id, secret):
            authenticator.lockout.record_failure(client_id, address)
            raise OAuthFailure(401, "invalid_client", "Unknown client id or wrong secret")
    return client_id


def _exchanged_token(authenticator: Authenticator, form: dict[str, str]) -> VerifiedToken:
    """The valid token a token-exchange request presents, still within its session.

    Raises:
        OAuthFailure: 400 ``invalid_request`` without a token, 401 ``invalid_grant`` for a
            token that is invalid, expired, not an access token of this catalog, of a
            client no longer configured, or older than ``session_lifetime_s`` since its
            client proved its secret.
    """
    token = form.get("subject_token")
    if not token:
        raise OAuthFailure(400, "invalid_request", "subject_token is required")
    if form.get("subject_token_type", ACCESS_TOKEN_TYPE) != ACCESS_TOKEN_TYPE:
        raise OAuthFailure(400, "invalid_request", "subject_token_type must be an access token")
    try:
        verified = authenticator.issuer.verify(token)
    except CatalogError as error:
        raise OAuthFailure(401, "invalid_grant", str(error)) from None
    if verified.subject not in authenticator.settings.clients and not _open(authenticator):
        raise OAuthFailure(401, "invalid_grant", "The token's client is not configured")
    age_s = time.time() - verified.authenticated_at_s
    if age_s > authenticator.settings.session_lifetime_s:
        raise OAuthFailure(401, "invalid_grant", "The session has ended: authenticate with "
                                                 "the client secret again")
    return verified


async def issue_token(authenticator: Authenticator, form: dict[str, str],
                      authorization: str | None, address: str | None) -> TokenResponse:
    """Answer a token request: check the grant, then sign a token for its subject.

    Args:
        authenticator: The application's authenticator (clients, issuer, lockout).
        form: The form fields of the request.
        authorization: The ``Authorization`` header, if any.
        address: The caller's address, for the lockout.

    Returns:
        The token response (``token_type`` ``bearer``, ``expires_in`` in seconds).

    Raises:
        OAuthFailure: 400 ``unsupported_grant_type``/``invalid_request``, 401
            ``invalid_client``/``invalid_grant`` or 429.
    """
    grant = form.get("grant_type")
    authenticated_at_s = None
    if grant == CLIENT_CREDENTIALS:
        subject = await _client_credentials(authenticator, form, authorization, address)
    elif grant == TOKEN_EXCHANGE:
        exchanged = _exchanged_token(authenticator, form)
        subject, authenticated_at_s = exchanged.subject, exchanged.authenticated_at_s
    else:
        raise OAuthFailure(400, "unsupported_grant_type", f"Unsupported grant_type {grant!r}")
    scope = form.get("scope")
    return TokenResponse(
        access_token=authenticator.issuer.issue(subject, scope, authenticated_at_s),
        token_type="bearer",
        expires_in=authenticator.issuer.lifetime_s,
        issued_token_type=ACCESS_TOKEN_TYPE,
        scope=scope,
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
    """Exchange client credentials, or a valid token, for a token.

    Deprecated by the spec (since Iceberg 1.6.0, removal planned in 2.0). Errors use the
    spec's ``OAuthError`` body; a 429 carries ``Retry-After``.
    """
    authenticator: Authenticator = request.app.state.authenticator
    form = dict(parse_qsl((await request.body()).decode(errors="replace")))
    address = request.client.host if request.client else None
    try:
        token = await issue_token(authenticator, form, request.headers.get("authorization"),
                                  address)
    except OAuthFailure as failure:
        response = json_response(failure.body, failure.code)
        if failure.retry_after_s is not None:
            response.headers["Retry-After"] = str(failure.retry_after_s)
        return response
    return json_response(token)
