"""The operations of the Iceberg REST Catalog spec (release 1.11.0), as data.

Used to advertise exactly the served spec operations in ``GET /v1/config`` (``endpoints``),
to know which requests honour an ``Idempotency-Key`` (the spec lists the header on those
operations only) and to answer 406 for spec operations this server does not serve.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SpecOperation:
    """One operation of the spec.

    Attributes:
        method: HTTP method, upper case.
        path: Path template as written in the spec, e.g. ``/v1/{prefix}/namespaces``.
        operation_id: The spec's ``operationId``.
        idempotent: Whether the spec accepts an ``Idempotency-Key`` header on it.
    """

    method: str
    path: str
    operation_id: str
    idempotent: bool = False
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literals = re.split(r"\{[^}]+\}", self.path.replace("/{prefix}", ""))
        pattern = "[^/]+".join(re.escape(part) for part in literals)
        object.__setattr__(self, "_regex", re.compile(pattern))

    @property
    def endpoint(self) -> str:
        """The ``"METHOD /v1/{prefix}/..."`` string used in ``CatalogConfig.endpoints``."""
        return f"{self.method} {self.path}"

    def matches(self, method: str, path: str) -> bool:
        """Tell whether a request (path relative to the catalog base URI) is this operation.

        Args:
            method: HTTP method of the request.
            path: Request path after the catalog base URI, e.g. ``/v1/namespaces/a``.
        """
        return method.upper() == self.method and self._regex.fullmatch(path) is not None


_N = "/v1/{prefix}/namespaces"
_T = f"{_N}/{{namespace}}/tables/{{table}}"
_V = f"{_N}/{{namespace}}/views/{{view}}"

#: Every operation of spec 1.11.0 (``/v1/config`` and ``/v1/oauth/tokens`` included).
SPEC_OPERATIONS: tuple[SpecOperation, ...] = (
    SpecOperation("GET", "/v1/config", "getConfig"),
    SpecOperation("POST", "/v1/oauth/tokens", "getToken"),
    SpecOperation("GET", _N, "listNamespaces"),
    SpecOperation("POST", _N, "createNamespace", idempotent=True),
    SpecOperation("GET", f"{_N}/{{namespace}}", "loadNamespaceMetadata"),
    SpecOperation("HEAD", f"{_N}/{{namespace}}", "namespaceExists"),
    SpecOperation("DELETE", f"{_N}/{{namespace}}", "dropNamespace", idempotent=True),
    SpecOperation("POST", f"{_N}/{{namespace}}/properties", "updateProperties", idempotent=True),
    SpecOperation("GET", f"{_N}/{{namespace}}/tables", "listTables"),
    SpecOperation("POST", f"{_N}/{{namespace}}/tables", "createTable", idempotent=True),
    SpecOperation("POST", f"{_T}/plan", "planTableScan", idempotent=True),
    SpecOperation("GET", f"{_T}/plan/{{plan-id}}", "fetchPlanningResult"),
    SpecOperation("DELETE", f"{_T}/plan/{{plan-id}}", "cancelPlanning", idempotent=True),
    SpecOperation("POST", f"{_T}/tasks", "fetchScanTasks", idempotent=True),
    SpecOperation("POST", f"{_N}/{{namespace}}/register", "registerTable", idempotent=True),
    SpecOperation("GET", _T, "loadTable"),
    SpecOperation("POST", _T, "updateTable", idempotent=True),
    SpecOperation("DELETE", _T, "dropTable", idempotent=True),
    SpecOperation("HEAD", _T, "tableExists"),
    SpecOperation("GET", f"{_T}/credentials", "loadCredentials"),
    SpecOperation("POST", f"{_T}/sign", "signRequest"),
    SpecOperation("POST", "/v1/{prefix}/tables/rename", "renameTable", idempotent=True),
    SpecOperation("POST", f"{_T}/metrics", "reportMetrics"),
    SpecOperation("POST", "/v1/{prefix}/transactions/commit", "commitTransaction", idempotent=True),
    SpecOperation("GET", f"{_N}/{{namespace}}/views", "listViews"),
    SpecOperation("POST", f"{_N}/{{namespace}}/views", "createView"),
    SpecOperation("GET", _V, "loadView"),
    SpecOperation("POST", _V, "replaceView", idempotent=True),
    SpecOperation("DELETE", _V, "dropView", idempotent=True),
    SpecOperation("HEAD", _V, "viewExists"),
    SpecOperation("POST", "/v1/{prefix}/views/rename", "renameView", idempotent=True),
    SpecOperation("POST", f"{_N}/{{namespace}}/register-view", "registerView", idempotent=True),
)

#: Operations that ``CatalogConfig.endpoints`` may list (those under ``/v1/{prefix}``).
ADVERTISABLE = tuple(op for op in SPEC_OPERATIONS if op.path.startswith("/v1/{prefix}/"))


def find_operation(method: str, path: str) -> SpecOperation | None:
    """Return the spec operation a request is, if any.

    Args:
        method: HTTP method of the request.
        path: Request path after the catalog base URI, e.g. ``/v1/namespaces/a/tables``.

    Returns:
        The matching operation, or None.
    """
    return next((op for op in SPEC_OPERATIONS if op.matches(method, path)), None)
