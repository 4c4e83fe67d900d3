"""Each keyword of the compiled check (lib.json_schema_fast) at its edges, beside jsonschema's answer:
the boolean schemas, a list of types, properties with and without ``additionalProperties``, the
bounds of arrays, strings and numbers, each met exactly and missed by one, and the schemas whose
keywords are malformed, which the check leaves to jsonschema."""

import pytest

from lib.json_schema import Validator
from lib.json_schema_fast import compile_check


@pytest.mark.parametrize(("schema", "document", "valid"), [
    # The boolean schemas: true takes anything, false nothing.
    (True, {"a": [1]}, True),
    (True, None, True),
    (False, "a", False),
    (False, None, False),
    # A list of types: any one of them will do.
    ({"type": ["string", "integer"]}, "a", True),
    ({"type": ["string", "integer"]}, 1, True),
    ({"type": ["string", "integer"]}, None, False),
    ({"type": ["integer", "null"]}, None, True),
    ({"type": ["integer", "null"]}, 1.5, False),
    # Properties: a name not listed is allowed unless additionalProperties says otherwise.
    ({"properties": {"a": {}}}, {"b": 1}, True),
    ({"properties": {"a": {"type": "string"}}}, {"a": "x", "b": 1}, True),
    ({"properties": {"a": {"type": "string"}}}, {"a": 1}, False),
    ({"required": ["a"]}, {"a": None, "b": 1}, True),
    ({"required": ["a", "b"]}, {"a": 1}, False),
    ({"additionalProperties": False}, {"a": 1}, False),
    ({"additionalProperties": False}, {}, True),
    ({"additionalProperties": True}, {"a": 1}, True),
    ({"additionalProperties": {"type": "integer"}}, {"a": 1}, True),
    # Arrays: each bound met exactly, and missed by one.
    ({"minItems": 2}, [1], False),
    ({"minItems": 2}, [1, 2], True),
    ({"minItems": 1}, [1], True),
    ({"maxItems": 1}, [1], True),
    ({"maxItems": 1}, [1, 2], False),
    ({"maxItems": 0}, [], True),
    ({"minItems": 1, "maxItems": 2}, [1, 2], True),
    ({"items": {"type": "string"}}, ["a", "b"], True),
    ({"items": {"type": "string"}}, ["a", 1], False),
    ({"items": {"const": "a"}}, ["a"], True),
    # Strings: each bound met exactly, and missed by one.
    ({"minLength": 2}, "a", False),
    ({"minLength": 2}, "ab", True),
    ({"maxLength": 3}, "", True),
    ({"maxLength": 3}, "abc", True),
    ({"maxLength": 3}, "abcd", False),
    ({"pattern": "^a"}, "ab", True),
    ({"pattern": "^a"}, "ba", False),
    ({"minLength": 1, "pattern": "b"}, "ab", True),
    # Numbers: the bounds are inclusive.
    ({"minimum": 0}, 0, True),
    ({"minimum": 0}, -1, False),
    ({"minimum": 1.5}, 1.5, True),
    ({"maximum": 2}, 2, True),
    ({"maximum": 2}, 2.5, False),
    ({"maximum": 2.5}, 2.5, True),
    ({"minimum": 0, "maximum": 0}, 0, True),
    # const and enum of strings.
    ({"const": "a"}, "b", False),
    ({"enum": ["a", "b"]}, "b", True),
    ({"enum": ["a", "b"]}, "c", False),
    ({"const": "a", "enum": ["a", "b"]}, "b", False),
    ({"const": "a", "enum": ["a", "b"]}, "a", True),
])
def test_each_keyword_at_its_edges_answers_as_jsonschema_does(schema, document, valid):
    assert Validator(schema).is_valid(document) is valid
    check = compile_check(schema)
    assert check is not None
    assert check(document) is valid


@pytest.mark.parametrize("schema", [
    {"properties": []},
    {"properties": [], "required": []},
    {"required": "a"},
    {"required": "a", "properties": {}},
    {"properties": {"a": {"allOf": [{}]}}},
    {"additionalProperties": {"uniqueItems": True}},
    {"items": {"$ref": "#"}},
    {"enum": "a"},
    {"enum": ["a", None]},
    {"const": None},
    {"type": ["string", 1]},
])
def test_a_malformed_or_unhandled_keyword_anywhere_leaves_the_schema_to_jsonschema(schema):
    assert compile_check(schema) is None
