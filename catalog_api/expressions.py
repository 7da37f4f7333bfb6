"""The REST spec's ``Expression`` JSON <-> pyiceberg ``BooleanExpression``.

pyiceberg 0.12 parses most of the spec's expression JSON itself (``BooleanExpression``
is a pydantic model with a validator dispatching on ``type``). This module fills the gaps
of that parser against the spec (components/schemas/Expression, release 1.11.0):

- ``{"type": "true"}`` / ``{"type": "false"}`` (pyiceberg reads only bare ``true``/``false``
  and fails with a ``TypeError`` on the spec's object form);
- transform terms (``{"type": "transform", ...}``), which pyiceberg cannot bind: rejected
  with a clear 400 instead of a pydantic error;
- anything malformed becomes a ``BadRequestError`` naming the fragment at fault.

Serialization goes the other way with the spec's object form for ``true``/``false``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, BooleanExpression

from catalog_api.errors import BadRequestError

_CONSTANTS: dict[str, BooleanExpression] = {"true": AlwaysTrue(), "false": AlwaysFalse()}
_CHILD_KEYS = ("left", "right", "child")
_MAX_DEPTH = 200


def _normalize(node: Any, depth: int = 0) -> Any:
    """Rewrite the spec's constant objects into the booleans pyiceberg reads; check terms."""
    if depth > _MAX_DEPTH:
        raise BadRequestError(f"Filter expression nested deeper than {_MAX_DEPTH} levels")
    if isinstance(node, bool):
        return node
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise BadRequestError(f"Invalid filter expression (no 'type'): {node!r:.200}")
    kind = node["type"]
    if kind in _CONSTANTS:
        return kind == "true"
    term = node.get("term")
    if isinstance(term, dict):
        raise BadRequestError(
            f"Transform terms in filters are not supported (type '{kind}'): {term!r:.200}"
        )
    return {
        key: _normalize(value, depth + 1) if key in _CHILD_KEYS else value
        for key, value in node.items()
    }


def parse_expression(node: Any) -> BooleanExpression:
    """Parse a REST ``Expression`` JSON value into an unbound pyiceberg expression.

    Implements components/schemas/Expression of the REST spec: ``true``/``false``,
    ``and``/``or``/``not``, unary (``is-null``, ``not-null``, ``is-nan``, ``not-nan``),
    literal (``eq``, ``lt``, ... ``starts-with``) and set (``in``, ``not-in``) expressions
    whose term is a column reference (a string).

    Args:
        node: The decoded JSON value (a dict, or a bare boolean as older clients send).

    Returns:
        The unbound expression (``AlwaysTrue()`` for ``{"type": "true"}``).

    Raises:
        BadRequestError: If the JSON is not a valid expression, uses an unknown type, or
            uses a transform term.
    """
    normalized = _normalize(node)
    try:
        return BooleanExpression.model_validate(normalized)
    except (ValidationError, TypeError, ValueError) as exc:
        raise BadRequestError(f"Invalid filter expression {node!r:.200}: {exc}") from exc


def _constant_objects(node: Any) -> Any:
    if isinstance(node, bool):
        return {"type": "true" if node else "false"}
    if isinstance(node, dict):
        return {
            key: _constant_objects(value) if key in _CHILD_KEYS else value
            for key, value in node.items()
        }
    return node


def expression_to_json(expression: BooleanExpression) -> Any:
    """Serialize an unbound expression as the REST spec's ``Expression`` JSON.

    Args:
        expression: An unbound pyiceberg expression.

    Returns:
        The JSON-ready value; constants use the spec's ``{"type": "true"}`` form.
    """
    return _constant_objects(expression.model_dump(mode="json", by_alias=True))
