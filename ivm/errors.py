"""Errors raised by the incremental view maintenance engine."""

from __future__ import annotations

from sqlglot.errors import SqlglotError


class IvmError(Exception):
    """Root of every error raised by :mod:`ivm`.

    Attributes:
        view: Name of the view at fault, when known.
        fragment: The SQL fragment at fault, when known.
    """

    def __init__(self, message: str, *, view: str | None = None, fragment: str | None = None):
        self.view = view
        self.fragment = fragment
        where = f"view {view!r}: " if view else ""
        at = f" (at: {fragment})" if fragment else ""
        super().__init__(f"{where}{message}{at}")


class SqlParseError(IvmError):
    """The view's SQL does not parse or does not resolve against the source schemas."""

    @classmethod
    def of(cls, error: SqlglotError, sql: str, view: str | None = None) -> SqlParseError:
        """The error for sqlglot's ``error``: its first problem and where, in plain text.

        sqlglot's own message underlines the spot with terminal escape codes.
        """
        errors = getattr(error, "errors", None) or [{}]  # a TokenError has none
        first = errors[0]
        where = (f" (line {first['line']}, column {first['col']})"
                 if "line" in first and "col" in first else "")
        problem = first.get("description") or str(error).splitlines()[0]
        return cls(f"SQL does not parse: {problem}{where}", view=view, fragment=sql)


class NotIncrementalError(IvmError):
    """The view cannot be maintained incrementally; ``reason`` names why.

    Raised only when the refresh policy is ``incremental``; under ``auto`` the view
    runs as a full recompute and the reason is reported instead.
    """

    def __init__(self, reason: str, *, view: str | None = None, fragment: str | None = None):
        self.reason = reason
        super().__init__(f"not incremental: {reason}", view=view, fragment=fragment)


class SumOverflowError(IvmError):
    """A group's decimal sum in the aggregate state overflows the type of Spark's ``SUM``.

    Spark makes such a SUM NULL, and a NULL sum cannot be advanced by adding deltas, so
    the invertible-aggregate law stops for the view: its groups are recomputed instead
    (:func:`ivm.evaluate.maintain`), as long as a sum stays past the type's range.
    """
