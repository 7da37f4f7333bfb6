"""Who is calling: client secrets checked at the token endpoint, bearer tokens on every route.

One :class:`Authenticator` per application holds the clients' Argon2 secret hashes (never the
secrets), the catalog's token issuer, the external issuer's verifier if any, the lockout of
wrong secrets and a short cache of verified tokens.
"""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import VerificationError
from cachetools import TTLCache

from catalog_api.errors import CatalogError, NotAuthorizedError
from catalog_api.security.lockout import FailureLockout
from catalog_api.security.roles import Principal, anonymous_admin
from catalog_api.security.settings import AuthSettings
from catalog_api.security.tokens import (
    ISSUER,
    OidcVerifier,
    TokenIssuer,
    VerifiedToken,
    unverified_issuer,
)

BEARER = "bearer"
#: Verified tokens remembered, and for how long at most (a token is also dropped at expiry).
TOKEN_CACHE_SIZE = 10_000
TOKEN_CACHE_TTL_S = 60.0
#: Argon2 checks run at once (each takes about 64 MiB and 50 ms of a core); more requests
#: wait, so that guesses cannot exhaust memory or race past the lockout.
MAX_CONCURRENT_SECRET_CHECKS = 2


class AuthSetupError(CatalogError):
    """The auth settings cannot be used: a client's secret or the token key is unreadable.

    Attributes:
        key: The configuration key at fault, e.g. ``auth.clients.pipeline``.
        reason: What is wrong with it, e.g. ``environment variable X is unset or empty``.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"{key}: {reason}")


class Authenticator:
    """Checks client secrets and bearer tokens; maps both to a :class:`Principal`.

    Args:
        settings: The auth settings.
        audience: The catalog's name, the ``aud`` of its tokens.

    Raises:
        AuthSetupError: A client secret or the token signing key cannot be read.
    """

    def __init__(self, settings: AuthSettings, audience: str) -> None:
        self.settings = settings
        self.enabled = settings.enabled
        try:
            self.issuer = TokenIssuer(settings, audience)
        except ValueError as error:
            raise AuthSetupError("auth.token_key", str(error)) from None
        self.oidc = OidcVerifier(settings.oidc) if settings.oidc else None
        self.lockout = FailureLockout(settings.lockout)
        self._hasher = PasswordHasher()
        self._hashes = {client: self._hash_of(client) for client in settings.clients}
        self._unknown_client_hash = self._hasher.hash("no such client")
        self.secret_checks = anyio.Semaphore(MAX_CONCURRENT_SECRET_CHECKS)
        self._verified: TTLCache[str, VerifiedToken] = TTLCache(TOKEN_CACHE_SIZE,
                                                                TOKEN_CACHE_TTL_S)

    def _hash_of(self, client: str) -> str:
        entry = self.settings.clients[client]
        try:
            secret = entry.read_secret()
        except ValueError as error:
            raise AuthSetupError(f"auth.clients.{client}", str(error)) from None
        if secret is None:
            assert entry.secret_hash is not None  # ClientSettings requires one source
            return entry.secret_hash
        return self._hasher.hash(secret)

    def check_secret(self, client_id: str, secret: str) -> bool:
        """Whether ``secret`` is the client's (Argon2, slow on purpose: run it off the loop).

        An unknown client id costs the same time as a known one.
        """
        stored = self._hashes.get(client_id, self._unknown_client_hash)
        try:
            return self._hasher.verify(stored, secret) and client_id in self._hashes
        except VerificationError:
            return False

    def principal_named(self, name: str) -> Principal:
        """The principal ``name`` with its configured grants."""
        return Principal(name, self.settings.grants_of(name))

    async def authenticate(self, authorization: str | None) -> Principal:
        """The caller of a request, from its ``Authorization`` header.

        Without auth every caller is the anonymous admin.

        Raises:
            NotAuthorizedError: No bearer token, or an invalid or expired one (401).
        """
        if not self.enabled:
            return anonymous_admin()
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != BEARER or not token.strip():
            raise NotAuthorizedError("Authentication required: send a bearer token")
        token = token.strip()
        verified = self._verified.get(token)
        if verified is None or verified.expires_at_s <= time.time():
            verified = await anyio.to_thread.run_sync(self.verify, token)
            self._verified[token] = verified
        return self.principal_named(verified.subject)

    def verify(self, token: str) -> VerifiedToken:
        """Check a token with the verifier of the issuer it names.

        Raises:
            NotAuthorizedError: Unknown issuer, or an invalid or expired token (401).
        """
        issuer = unverified_issuer(token)
        if issuer == ISSUER:
            return self.issuer.verify(token)
        if self.oidc is not None and issuer == self.oidc.settings.issuer:
            verified = self.oidc.verify(token)
            if verified.subject in self.settings.clients:
                raise NotAuthorizedError("The token's subject is the name of a client")
            return verified
        raise NotAuthorizedError("Invalid token: unknown issuer")
