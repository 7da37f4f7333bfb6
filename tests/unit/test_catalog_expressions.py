"""The REST ``Expression`` JSON parser and serializer (catalog_api.expressions)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundEqualTo,
    EqualTo,
    GreaterThanOrEqual,
    In,
    IsNull,
    Not,
    NotNaN,
    Or,
    StartsWith,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType

from catalog_api.errors import BadRequestError
from catalog_api.expressions import expression_to_json, parse_expression

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "day", DateType(), required=False),
    NestedField(4, "score", DoubleType(), required=False),
)


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ({"type": "true"}, AlwaysTrue()),
        ({"type": "false"}, AlwaysFalse()),
        (True, AlwaysTrue()),
        ({"type": "eq", "term": "id", "value": 5}, EqualTo("id", 5)),
        ({"type": "in", "term": "id", "values": [1, 2]}, In("id", [1, 2])),
        ({"type": "is-null", "term": "name"}, IsNull("name")),
        ({"type": "not-nan", "term": "score"}, NotNaN("score")),
        ({"type": "starts-with", "term": "name", "value": "ab"}, StartsWith("name", "ab")),
        (
            {
                "type": "and",
                "left": {"type": "gt-eq", "term": "id", "value": 3},
                "right": {"type": "not", "child": {"type": "is-null", "term": "name"}},
            },
            And(GreaterThanOrEqual("id", 3), Not(IsNull("name"))),
        ),
    ],
)
def test_parse_spec_expressions(node: Any, expected: Any) -> None:
    assert parse_expression(node) == expected


def test_constants_nested_in_and_or_are_parsed() -> None:
    right = {"type": "eq", "term": "id", "value": 1}
    node = {"type": "or", "left": {"type": "false"}, "right": right}
    parsed = parse_expression(node)
    assert isinstance(parsed, Or)
    assert parsed.left == AlwaysFalse()
    assert parsed.right == EqualTo("id", 1)
    node = {"type": "not", "child": {"type": "true"}}
    parsed = parse_expression(node)
    assert isinstance(parsed, Not) and parsed.child == AlwaysTrue()


def test_date_literal_binds_to_date_column() -> None:
    bound = parse_expression({"type": "eq", "term": "day", "value": "2024-03-01"}).bind(SCHEMA)
    assert isinstance(bound, BoundEqualTo)
    assert bound.literal.value == (datetime.date(2024, 3, 1) - datetime.date(1970, 1, 1)).days


@pytest.mark.parametrize(
    "node",
    [
        {"type": "bogus", "term": "id"},
        {"term": "id", "value": 1},
        "id = 1",
        {"type": "eq", "term": "id"},
        {"type": "and", "left": {"type": "true"}},
        {"type": "eq", "term": {"type": "transform", "transform": "day", "term": "ts"}, "value": 1},
    ],
)
def test_invalid_expressions_are_bad_requests(node: Any) -> None:
    with pytest.raises(BadRequestError):
        parse_expression(node)


def test_transform_term_message_names_the_problem() -> None:
    term = {"type": "transform", "transform": "day", "term": "ts"}
    node = {"type": "eq", "term": term, "value": 1}
    with pytest.raises(BadRequestError, match="Transform terms"):
        parse_expression(node)


@pytest.mark.parametrize(
    "expression",
    [
        EqualTo("id", 5),
        And(EqualTo("name", "x"), Or(IsNull("id"), In("id", [1, 2, 3]))),
        Not(StartsWith("name", "a")),
    ],
)
def test_round_trip(expression: Any) -> None:
    assert parse_expression(expression_to_json(expression)) == expression


def test_constants_serialize_in_object_form() -> None:
    assert expression_to_json(AlwaysTrue()) == {"type": "true"}
    assert expression_to_json(AlwaysFalse()) == {"type": "false"}
    assert expression_to_json(Not(IsNull("id"))) == {
        "type": "not",
        "child": {"type": "is-null", "term": "id"},
    }
