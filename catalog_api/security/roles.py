"""Roles per namespace: who may read, write or administer what.

A principal holds grants: a role on a namespace, inherited by every namespace below it, or on
the whole catalog (the empty namespace). Its role on a namespace is the highest role granted
on that namespace or any of its ancestors. The model follows Apache Polaris' catalog roles,
reduced to three ordered roles:

- ``reader``: list, load and check namespaces, tables and views; plan scans; load read-only
  credentials; have read requests signed; report metrics.
- ``writer``: a reader that also creates, commits, drops (without purge), renames and
  registers tables, views and generic tables, and has write requests signed.
- ``admin``: a writer that also creates and drops namespaces, sets their properties and
  purges tables' files.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pyiceberg.typedef import Identifier

CATALOG: Identifier = ()
"""The namespace of a catalog-wide grant."""


class Role(IntEnum):
    """A role on a namespace; a higher role includes every right of the lower ones."""

    READER = 1
    WRITER = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        """The role's name in configuration and messages (``reader``, ``writer``, ``admin``)."""
        return self.name.lower()


@dataclass(frozen=True)
class Grant:
    """A role on a namespace and everything below it.

    Attributes:
        namespace: Namespace parts; ``()`` for the whole catalog.
        role: The role granted.
    """

    namespace: Identifier
    role: Role

    def covers(self, namespace: Identifier) -> bool:
        """Whether ``namespace`` is this grant's namespace or below it."""
        return tuple(namespace[: len(self.namespace)]) == tuple(self.namespace)


@dataclass(frozen=True)
class Principal:
    """Who is calling, and the grants configured for them.

    Attributes:
        name: The principal's name: an OAuth2 client id, or an external token's subject.
        grants: The principal's grants.
    """

    name: str
    grants: tuple[Grant, ...] = ()

    def role_on(self, namespace: Identifier) -> Role | None:
        """The highest role granted on ``namespace`` or an ancestor; None when none is."""
        roles = [grant.role for grant in self.grants if grant.covers(namespace)]
        return max(roles) if roles else None

    def can(self, namespace: Identifier, role: Role) -> bool:
        """Whether the principal holds at least ``role`` on ``namespace``."""
        held = self.role_on(namespace)
        return held is not None and held >= role

    def require(self, namespace: Identifier, role: Role, action: str) -> None:
        """Refuse unless the principal holds at least ``role`` on ``namespace``.

        Args:
            namespace: Namespace parts (``()`` for catalog-wide rights).
            role: The least role the action needs.
            action: What is refused, for the message (e.g. ``drop table sales.orders``).

        Raises:
            ForbiddenError: 403 naming the principal, the action and the role it needs.
        """
        if not self.can(namespace, role):
            from catalog_api.errors import ForbiddenError  # it loads FastAPI: only to refuse

            where = ".".join(namespace) or "the catalog"
            raise ForbiddenError(
                f"Principal {self.name!r} may not {action}: it needs the {role.label} role "
                f"on {where}"
            )

    def sees(self, namespace: Identifier) -> bool:
        """Whether listing shows ``namespace``: a role on it, or a grant somewhere below it."""
        return self.role_on(namespace) is not None or any(
            tuple(grant.namespace[: len(namespace)]) == tuple(namespace)
            for grant in self.grants
        )


def anonymous_admin() -> Principal:
    """The caller of a catalog that runs without authentication: admin of everything."""
    return Principal("anonymous", (Grant(CATALOG, Role.ADMIN),))


def parse_role(value: str) -> Role:
    """The role named ``reader``, ``writer`` or ``admin`` (any case).

    Raises:
        ValueError: For any other name.
    """
    try:
        return Role[value.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown role {value!r}: expected reader, writer or admin") from None

