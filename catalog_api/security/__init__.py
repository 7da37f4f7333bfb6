"""Authentication and authorization of the catalog service.

OAuth2 client credentials at the spec's ``POST /v1/oauth/tokens`` give signed, expiring
tokens (PyJWT); an external OpenID Connect issuer's tokens are accepted too. Principals hold
roles (reader, writer, admin) per namespace, inherited by child namespaces. See
``docs/security.md``.

The names below are imported when first used (PEP 562): a process that only reads the
settings (:mod:`catalog_api.security.settings`, as the pipeline's config does) does not
load the authenticator, its token libraries and the web framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULES = {
    "PRINCIPAL": "catalog_api.security.middleware",
    "AuthSettings": "catalog_api.security.settings",
    "AuthSetupError": "catalog_api.security.authenticator",
    "AuthenticationMiddleware": "catalog_api.security.middleware",
    "Authenticator": "catalog_api.security.authenticator",
    "ClientSettings": "catalog_api.security.settings",
    "Grant": "catalog_api.security.roles",
    "GrantSettings": "catalog_api.security.settings",
    "OidcSettings": "catalog_api.security.settings",
    "Principal": "catalog_api.security.roles",
    "Role": "catalog_api.security.roles",
    "SecretSource": "catalog_api.security.settings",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module 'catalog_api.security' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)
