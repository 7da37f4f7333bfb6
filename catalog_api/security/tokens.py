"""Bearer tokens: the catalog's own (HS256 JWTs it issues) and an external issuer's (OIDC).

Tokens are JSON Web Tokens (RFC 7519) signed and checked with PyJWT. The catalog's own carry
``iss`` (:data:`ISSUER`), ``aud`` (the catalog's name), ``sub`` (the client id), ``iat``,
``exp`` and ``jti``. An external OpenID Connect issuer's tokens are checked against its
published keys (JWKS), fetched and cached by ``jwt.PyJWKClient``.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from catalog_api.errors import NotAuthorizedError
from catalog_api.security.settings import AuthSettings, OidcSettings

ISSUER = "lakehouse-freshness-catalog"
"""The ``iss`` of the tokens the catalog issues."""
ALGORITHM = "HS256"
DISCOVERY_PATH = "/.well-known/openid-configuration"
LEEWAY_S = 30
"""Clock skew tolerated on ``exp``, ``iat`` and ``nbf``, in seconds."""


@dataclass(frozen=True)
class VerifiedToken:
    """The identity a valid token proves.

    Attributes:
        subject: The principal's name (``sub``, or the configured claim of an external token).
        expires_at_s: Expiry, in seconds since the epoch.
        authenticated_at_s: When the client last proved its secret (``auth_time``), in
            seconds since the epoch; the issue time for an external token.
    """

    subject: str
    expires_at_s: float
    authenticated_at_s: float


def _subject(claims: dict[str, Any], claim: str) -> str:
    subject = claims.get(claim)
    if not isinstance(subject, str) or not subject:
        raise NotAuthorizedError(f"The token has no {claim!r} claim naming a principal")
    return subject


def _decode(token: str, key: Any, algorithms: list[str], *, issuer: str,
            audience: str | None) -> dict[str, Any]:
    """Verify a token's signature and standard claims; map failures to the spec's errors.

    ``audience`` None skips the ``aud`` check (an external issuer configured without one).
    """
    options: jwt.types.Options = {"require": ["exp", "iat"], "verify_aud": audience is not None}
    try:
        claims: dict[str, Any] = jwt.decode(
            token, key, algorithms=algorithms, leeway=LEEWAY_S, options=options,
            issuer=issuer, audience=audience,
        )
    except jwt.ExpiredSignatureError:
        # 401, not the spec's 419 AuthenticationTimeout: DuckDB cannot parse a 419, while
        # pyiceberg and the Java client fetch a new token on either.
        raise NotAuthorizedError("The token has expired; get a new one") from None
    except jwt.PyJWTError as error:
        raise NotAuthorizedError(f"Invalid token: {error}") from None
    return claims


class TokenIssuer:
    """Issues and verifies the catalog's own tokens.

    Args:
        settings: ``token_lifetime_s`` and the signing key (random when not configured).
        audience: The ``aud`` of issued tokens: the catalog's name.

    Raises:
        ValueError: The configured signing key cannot be read or is too short.
    """

    def __init__(self, settings: AuthSettings, audience: str) -> None:
        self._key = settings.token_key() or secrets.token_bytes(32)
        self.lifetime_s = settings.token_lifetime_s
        self.audience = audience

    def issue(self, subject: str, scope: str | None = None,
              authenticated_at_s: float | None = None) -> str:
        """A signed token for ``subject`` that expires after ``lifetime_s`` seconds.

        Args:
            subject: The client id.
            scope: The scope asked for, echoed in the token.
            authenticated_at_s: When the client proved its secret (``auth_time``); now
                when it just did.
        """
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": self.audience, "sub": subject, "iat": now,
                  "exp": now + self.lifetime_s, "jti": secrets.token_urlsafe(12),
                  "auth_time": int(authenticated_at_s or now)}
        if scope:
            claims["scope"] = scope
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, token: str) -> VerifiedToken:
        """Check a token this catalog issued.

        Raises:
            NotAuthorizedError: Bad signature, issuer, audience or claims, or expired (401).
        """
        claims = _decode(token, self._key, [ALGORITHM], audience=self.audience, issuer=ISSUER)
        authenticated = claims.get("auth_time", claims["iat"])
        return VerifiedToken(_subject(claims, "sub"), float(claims["exp"]), float(authenticated))


class OidcVerifier:
    """Verifies access tokens of an external OpenID Connect issuer against its JWKS.

    Args:
        settings: The issuer, audience, key location and principal claim.
    """

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._keys: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def _key_client(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._keys is None:
                uri = self.settings.jwks_uri or self._discover()
                self._keys = jwt.PyJWKClient(uri, cache_keys=True,
                                             lifespan=self.settings.jwks_cache_s, timeout=10)
            return self._keys

    def _discover(self) -> str:
        url = self.settings.issuer.rstrip("/") + DISCOVERY_PATH
        try:
            response = httpx.get(url, timeout=10.0)
            response.raise_for_status()
            return str(response.json()["jwks_uri"])
        except (httpx.HTTPError, ValueError, KeyError):
            raise NotAuthorizedError("The token issuer's keys cannot be fetched") from None

    def verify(self, token: str) -> VerifiedToken:
        """Check an external token's signature, issuer, audience and expiry.

        Raises:
            NotAuthorizedError: Bad or expired token, unknown key, or the issuer's keys
                unreachable (401).
        """
        try:
            key = self._key_client().get_signing_key_from_jwt(token).key
        except jwt.PyJWKClientConnectionError:
            raise NotAuthorizedError("The token issuer's keys cannot be fetched") from None
        except jwt.PyJWTError as error:
            raise NotAuthorizedError(f"Invalid token: {error}") from None
        claims = _decode(token, key, list(self.settings.algorithms),
                         issuer=self.settings.issuer, audience=self.settings.audience)
        claim = self.settings.principal_claim
        if claim == "email" and claims.get("email_verified") is not True:
            raise NotAuthorizedError("The token's email is not verified by its issuer")
        return VerifiedToken(_subject(claims, claim), float(claims["exp"]), float(claims["iat"]))


def unverified_issuer(token: str) -> str | None:
    """The ``iss`` a token claims, read without checking it (to pick its verifier).

    Raises:
        NotAuthorizedError: The token is not a JWT.
    """
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise NotAuthorizedError("Invalid token: not a JSON Web Token") from None
    issuer = claims.get("iss")
    return issuer if isinstance(issuer, str) else None
