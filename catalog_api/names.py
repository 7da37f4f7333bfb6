r"""Which namespace, table and view names the catalog accepts.

Names become folders of default locations (``<warehouse>/<namespace parts>/<name>``) and
values of pyiceberg's ``SqlCatalog`` columns ``table_namespace`` (the parts joined by dots)
and ``table_name``, both ``VARCHAR(255)``. So a name is refused when it would name another
folder (``.``, ``..``, ``/``, ``\``), hold a character a path or a PostgreSQL text cannot
(control characters, NUL included, and lone surrogates), or not fit a column or a folder
name (255 bytes in UTF-8; the joined namespace 255 characters).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from pyiceberg.typedef import Identifier

from catalog_api.errors import BadRequestError

#: Longest name or namespace part, in UTF-8 bytes: a folder name (and a ``VARCHAR(255)``).
MAX_NAME_BYTES = 255
#: Longest namespace, its parts joined by dots: the ``table_namespace VARCHAR(255)`` column.
MAX_NAMESPACE_CHARS = 255
#: Names that denote a folder itself or its parent.
RESERVED_NAMES = (".", "..")
SEPARATORS = ("/", "\\")
_SHOWN_CHARS = 60


def _shown(name: str) -> str:
    return repr(name if len(name) <= _SHOWN_CHARS else name[:_SHOWN_CHARS] + "...")


def name_problem(name: str) -> str | None:
    r"""Tell which rule a name breaks, or None when it is valid.

    Args:
        name: A table, view or generic-table name, or one namespace part.

    Returns:
        The rule, e.g. ``must not contain '/' or '\'``; None for a valid name.
    """
    if not name:
        return "must not be empty"
    if name in RESERVED_NAMES:
        return "must not be '.' or '..'"
    if any(separator in name for separator in SEPARATORS):
        return "must not contain '/' or '\\'"
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in name):
        return "must not contain control characters (such as NUL or 0x1F) or lone surrogates"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"must be at most {MAX_NAME_BYTES} bytes long in UTF-8"
    return None


def check_name(
    name: str, what: str = "Table name", error: type[Exception] = BadRequestError
) -> str:
    """Refuse an invalid table, view or generic-table name.

    Args:
        name: The name.
        what: What the name is, for the message (``Table name``, ``View name``).
        error: Exception class raised when invalid (lookups raise a not-found error).

    Returns:
        The name, unchanged.

    Raises:
        Exception: An instance of ``error`` whose message names the broken rule.
    """
    problem = name_problem(name)
    if problem is not None:
        raise error(f"Invalid {what.lower()} {_shown(name)}: {problem}")
    return name


def _namespace_problem(namespace: Sequence[str]) -> str | None:
    if not namespace:
        return "must not be empty"
    for part in namespace:
        problem = name_problem(part)
        if problem is not None:
            return f"part {_shown(part)} {problem}"
        if not part.strip():  # pyiceberg refuses parts that strip to ""
            return f"part {_shown(part)} must not be blank"
        if "." in part:  # SqlCatalog joins the parts with dots
            return f"part {_shown(part)} must not contain '.'"
    if len(".".join(namespace)) > MAX_NAMESPACE_CHARS:
        return f"must be at most {MAX_NAMESPACE_CHARS} characters long, parts joined by '.'"
    return None


def check_namespace(
    namespace: Sequence[str], error: type[Exception] = BadRequestError
) -> Identifier:
    """Refuse an invalid namespace.

    Each part follows the rules of names (:func:`name_problem`), is not blank and has no
    ``.``; the parts joined by dots are at most 255 characters.

    Args:
        namespace: The namespace parts.
        error: Exception class raised when invalid (lookups raise a not-found error).

    Returns:
        The namespace as a tuple.

    Raises:
        Exception: An instance of ``error`` whose message names the broken rule.
    """
    problem = _namespace_problem(namespace)
    if problem is not None:
        shown = _shown(".".join(namespace)) if namespace else "[]"
        raise error(f"Invalid namespace {shown}: {problem}")
    return tuple(namespace)
