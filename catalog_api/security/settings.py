"""Settings of the catalog's authentication and authorization (``CatalogSettings.auth``).

Client secrets are never written in the configuration itself: each client names an
environment variable or a file holding its secret, or gives an Argon2 hash of it (``lakehouse
hash-secret`` prints one). The service keeps only Argon2 hashes in memory.
"""

from __future__ import annotations

import os
from pathlib import Path

from argon2 import extract_parameters
from argon2.exceptions import InvalidHashError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catalog_api.security.roles import CATALOG, Grant, Role, parse_role

DEFAULT_TOKEN_LIFETIME_S = 3600
DEFAULT_SESSION_LIFETIME_S = 12 * 3600
#: Secrets and keys starting so are the examples of ``docker/.env.example``: refused.
PLACEHOLDER_PREFIX = "change-me"


def _checked_secret(value: str, what: str) -> str:
    """``value`` unless it is empty or still the example's placeholder.

    Raises:
        ValueError: Empty, or a ``change-me...`` placeholder.
    """
    if not value:
        raise ValueError(f"{what} is empty")
    if value.startswith(PLACEHOLDER_PREFIX):
        raise ValueError(f"{what} is still the example's placeholder: set a real one")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GrantSettings(_Strict):
    """One role of a principal.

    Attributes:
        role: ``reader``, ``writer`` or ``admin``.
        namespace: Dot-separated namespace the role applies to, with everything below it;
            unset for the whole catalog.
    """

    role: Role
    namespace: str | None = None

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: object) -> object:
        return parse_role(value) if isinstance(value, str) else value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is not None and any(not part.strip() for part in value.split(".")):
            raise ValueError("namespace parts must be non-blank (omit namespace for the "
                             "whole catalog)")
        return value

    def grant(self) -> Grant:
        """The grant this entry configures."""
        namespace = tuple(self.namespace.split(".")) if self.namespace else CATALOG
        return Grant(namespace, self.role)


class SecretSource(_Strict):
    """Where a secret is read from: an environment variable or a file, never the config.

    Attributes:
        secret_env: Environment variable holding the secret.
        secret_file: File holding the secret (surrounding whitespace is dropped).
    """

    secret_env: str | None = None
    secret_file: Path | None = None

    def read_secret(self) -> str | None:
        """The secret from the environment or the file; None when neither is set.

        Raises:
            ValueError: The variable is unset or empty, the file cannot be read or is
                empty, or the secret is still an example's ``change-me`` placeholder.
        """
        if self.secret_env is not None:
            value = os.environ.get(self.secret_env, "")
            if not value:
                raise ValueError(f"environment variable {self.secret_env} is unset or empty")
            return _checked_secret(value, f"environment variable {self.secret_env}")
        if self.secret_file is not None:
            try:
                value = self.secret_file.expanduser().read_text().strip()
            except OSError as error:
                raise ValueError(f"cannot read {self.secret_file}: {error.strerror}") from None
            return _checked_secret(value, str(self.secret_file))
        return None


class ClientSettings(SecretSource):
    """An OAuth2 client of ``POST /v1/oauth/tokens``; exactly one secret source is set.

    Attributes:
        secret_hash: Argon2 hash of the client secret (``$argon2id$...``), instead of
            ``secret_env`` or ``secret_file``.
    """

    secret_hash: str | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _one_source(self) -> ClientSettings:
        sources = [self.secret_env, self.secret_file, self.secret_hash]
        if sum(source is not None for source in sources) != 1:
            raise ValueError("set exactly one of secret_env, secret_file, secret_hash")
        if self.secret_hash is not None:
            try:
                extract_parameters(self.secret_hash)
            except InvalidHashError:
                raise ValueError("secret_hash is not an Argon2 hash (lakehouse hash-secret "
                                 "prints one)") from None
        return self


class OidcSettings(_Strict):
    """An external OpenID Connect issuer whose access tokens the catalog accepts.

    A principal named by an external token may not share its name with a configured
    client: such a token is refused, so that nobody who can choose a claim's value at the
    issuer becomes the pipeline.

    Attributes:
        issuer: The issuer URL; tokens must carry it as ``iss``.
        audience: The ``aud`` tokens must carry (required: without it, tokens the issuer
            made for any other application would be accepted).
        jwks_uri: Where the issuer's signing keys are; by default read from
            ``<issuer>/.well-known/openid-configuration``.
        principal_claim: The claim naming the principal (its key in ``grants``); for
            ``email``, the token must also carry ``email_verified: true``.
        algorithms: Signature algorithms accepted.
        jwks_cache_s: Seconds the issuer's keys are cached.
    """

    issuer: str
    audience: str
    jwks_uri: str | None = None
    principal_claim: str = "sub"
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"])
    jwks_cache_s: int = Field(default=300, gt=0)


class LockoutSettings(_Strict):
    """How the token endpoint slows down guessing of secrets.

    After ``max_failures`` wrong secrets for one client id, or from one address, within
    ``window_s`` seconds, the endpoint answers 429 with ``Retry-After`` until the window
    moves past them.
    """

    max_failures: int = Field(default=5, gt=0)
    window_s: int = Field(default=60, gt=0)


class AuthSettings(_Strict):
    """Authentication and authorization of the catalog service.

    Attributes:
        enabled: Require a bearer token on every route but ``GET /v1/config``, the token
            endpoint, ``/healthz`` and the API docs. Off, every caller is an anonymous admin
            (allowed on a loopback address only; see ``lakehouse serve``).
        token_lifetime_s: Lifetime of the tokens the catalog issues, in seconds.
        session_lifetime_s: How long tokens may be renewed by token exchange after the
            client last proved its secret, in seconds; then it must authenticate again.
        token_key_env: Environment variable with the key tokens are signed with (HS256).
            Unset (and no ``token_key_file``): a random key per process, so tokens do not
            outlive a restart and replicas do not accept each other's.
        token_key_file: File with that key, instead of ``token_key_env``.
        clients: OAuth2 clients by client id.
        grants: Roles by principal name (client id or external subject).
        oidc: An external issuer whose tokens are accepted too.
        lockout: Throttling of wrong secrets at the token endpoint.
    """

    enabled: bool = False
    token_lifetime_s: int = Field(default=DEFAULT_TOKEN_LIFETIME_S, gt=0)
    session_lifetime_s: int = Field(default=DEFAULT_SESSION_LIFETIME_S, gt=0)
    token_key_env: str | None = None
    token_key_file: Path | None = None
    clients: dict[str, ClientSettings] = Field(default_factory=dict)
    grants: dict[str, list[GrantSettings]] = Field(default_factory=dict)
    oidc: OidcSettings | None = None
    lockout: LockoutSettings = Field(default_factory=LockoutSettings)

    @model_validator(mode="after")
    def _usable(self) -> AuthSettings:
        if self.enabled and not self.clients and self.oidc is None:
            raise ValueError("auth is enabled but no clients and no oidc issuer are configured")
        if self.token_key_env and self.token_key_file:
            raise ValueError("set at most one of token_key_env, token_key_file")
        return self

    def token_key(self) -> bytes | None:
        """The configured token signing key, or None for a random one.

        Raises:
            ValueError: The variable is unset or the file cannot be read, the key is
                shorter than 32 bytes or still the example's placeholder.
        """
        source = SecretSource(secret_env=self.token_key_env, secret_file=self.token_key_file)
        key = source.read_secret()
        if key is None:
            return None
        if len(key.encode()) < 32:
            raise ValueError("the token signing key must be at least 32 bytes")
        return key.encode()

    def grants_of(self, principal: str) -> tuple[Grant, ...]:
        """The grants configured for a principal (none when it is not listed)."""
        return tuple(entry.grant() for entry in self.grants.get(principal, ()))
