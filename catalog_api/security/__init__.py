"""Authentication and authorization of the catalog service.

OAuth2 client credentials at the spec's ``POST /v1/oauth/tokens`` give signed, expiring
tokens (PyJWT); an external OpenID Connect issuer's tokens are accepted too. Principals hold
roles (reader, writer, admin) per namespace, inherited by child namespaces. See
``docs/security.md``.
"""

from catalog_api.security.authenticator import Authenticator, AuthSetupError
from catalog_api.security.middleware import PRINCIPAL, AuthenticationMiddleware
from catalog_api.security.roles import Grant, Principal, Role
from catalog_api.security.settings import (
    AuthSettings,
    ClientSettings,
    GrantSettings,
    OidcSettings,
    SecretSource,
)

__all__ = [
    "PRINCIPAL",
    "AuthSettings",
    "AuthSetupError",
    "AuthenticationMiddleware",
    "Authenticator",
    "ClientSettings",
    "Grant",
    "GrantSettings",
    "OidcSettings",
    "Principal",
    "Role",
    "SecretSource",
]
