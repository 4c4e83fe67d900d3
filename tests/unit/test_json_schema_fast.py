"""The compiled check (lib.json_schema_fast) answers as jsonschema's ``is_valid`` does, for every
schema it takes; every other schema is left to jsonschema; ``validator_for`` keeps jsonschema's errors."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.json_schema import Validator, validator_for
from lib.json_schema_fast import compile_check
from tests.conftest import PROJECT_DIR

NAMES = st.sampled_from(["repo", "prNumbers", "headSha", "x", "x\n", ""])
TEXT = st.sampled_from(["", "a", "hello", "hello\n", "Hello", "a b", "é", "abcdefghij" * 5, "1.0"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, -1.5, 2.5, 1e300]), TEXT)
DOCUMENTS = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=4)), max_leaves=12)
TYPES = st.sampled_from(["string", "object", "array", "boolean", "null", "integer", "number"])


def schemas(depth: int = 2):
    plain = st.fixed_dictionaries({}, optional={
        "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3)),
        "minLength": st.integers(0, 3), "maxLength": st.integers(0, 6),
        "pattern": st.sampled_from(["^[a-z]+$", "^h", "o$", "[0-9]"]),
        "minimum": st.sampled_from([0, 1, -1.5]), "maximum": st.sampled_from([0, 2, 2.5]),
        "const": TEXT, "enum": st.lists(TEXT, min_size=1, max_size=3),
        "minItems": st.integers(0, 2), "maxItems": st.integers(0, 3),
        "required": st.lists(NAMES, max_size=2, unique=True),
        "format": st.just("date-time"), "description": st.just("annotation only"),
    })
    if depth == 0:
        return st.one_of(st.booleans(), plain)
    sub = schemas(depth - 1)
    nested = st.fixed_dictionaries({}, optional={
        "properties": st.dictionaries(NAMES, sub, max_size=3), "additionalProperties": sub, "items": sub,
    })
    return st.one_of(st.booleans(), plain, st.tuples(plain, nested).map(lambda pair: {**pair[0], **pair[1]}))


@settings(max_examples=1500, deadline=None)
@given(schema=schemas(), document=DOCUMENTS)
def test_the_check_answers_as_jsonschema_does(schema, document):
    check = compile_check(schema)
    assert check is not None
    assert check(document) is Validator(schema).is_valid(document)


@pytest.mark.parametrize(("schema", "document", "valid"), [
    ({"additionalProperties": {"type": "string"}}, {"x": 1}, False),
    ({"additionalProperties": {"type": "string"}, "properties": {"x": {}}}, {"x": 1, "y": "b"}, True),
    ({"additionalProperties": False, "properties": {"x": {}}}, {"x": 1, "y": "b"}, False),
    ({"type": "integer"}, 1.0, True),
    ({"type": "integer"}, 1.5, False),
    ({"type": "integer"}, True, False),
    ({"type": "number"}, False, False),
    ({"minimum": 0}, True, True),
    ({"minimum": 0}, -0.5, False),
    ({"maximum": 2}, "3", True),
    ({"enum": ["a", "b"]}, ["a"], False),
    ({"const": "a"}, "a", True),
    ({"pattern": "^[a-z]+$"}, "abc\n", False),
    ({"items": False}, [], True),
    ({"items": False}, [1], False),
    ({"items": {"type": "string"}, "minItems": 1}, [], False),
    ({"required": ["a"]}, [], True),
    ({"maxLength": 1}, "é", True),
])
def test_the_check_answers_as_jsonschema_does_where_python_and_json_schema_differ(schema, document, valid):
    assert Validator(schema).is_valid(document) is valid
    assert compile_check(schema)(document) is valid


def registry_schemas() -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((PROJECT_DIR / "registry" / "schemas").glob("*.json"))]


@settings(max_examples=300, deadline=None)
@given(document=DOCUMENTS)
def test_the_registrys_schemas_that_compile_answer_as_jsonschema_does(document):
    for schema in registry_schemas():
        check = compile_check(schema)
        if check is not None:
            assert check(document) is Validator(schema).is_valid(document), schema.get("title")


def test_the_envelope_and_the_doors_payloads_compile():
    by_name = {path.name: json.loads(path.read_text()) for path in (PROJECT_DIR / "registry" / "schemas").glob("*.json")}
    for name in ("factory.event.v1.json", "repo-request.json", "merge-request.json", "workflow-run-failed.json"):
        assert compile_check(by_name[name]) is not None, name
    envelope = {"schemaVersion": "factory.event/v1", "eventId": "e-1", "type": "t", "source": "s", "subject": "s",
                "occurredAt": "2026-11-30T20:59:58Z", "correlationId": "c", "payload": {}}
    check = compile_check(by_name["factory.event.v1.json"])
    assert [check(envelope), check({**envelope, "eventId": "e-1\n"}), check({**envelope, "extra": 1})] == [
        True, False, False]


def test_schemas_with_other_keywords_are_left_to_jsonschema():
    for schema in ({"$ref": "#/$defs/x", "$defs": {"x": {}}}, {"uniqueItems": True}, {"enum": ["a", 1]},
                   {"const": 1}, {"patternProperties": {"^a": {}}}, {"allOf": [{}]}, {"type": "thing"},
                   {"properties": {"a": {"oneOf": [{}]}}}, {"prefixItems": [{}]}, {"exclusiveMinimum": 0}):
        assert compile_check(schema) is None, schema


def test_validator_for_keeps_jsonschemas_errors_and_skips_its_walk_for_a_valid_document():
    schema = {"type": "object", "required": ["repo"], "properties": {"repo": {"type": "string", "pattern": "^[a-z]+$"}}}
    validator = validator_for(schema)
    assert validator.schema is schema
    assert list(validator.iter_errors({"repo": "hello"})) == [] and validator.is_valid({"repo": "hello"})
    assert [e.message for e in validator.iter_errors({"repo": "hello\n"})] == ["'hello\\n' does not match '^[a-z]+$'"]
    assert [e.message for e in validator.iter_errors({})] == ["'repo' is a required property"]
    assert validator.is_valid({"repo": 1}) is False


def test_validator_for_judges_a_document_the_check_passes_by_the_check_alone(monkeypatch):
    # jsonschema's walk is not run for a document the compiled check accepts; a document the
    # check refuses is jsonschema's, with its errors.
    schema = {"required": ["repo"], "properties": {"repo": {"type": "string"}}}
    validator = validator_for(schema)
    walked = []
    iter_errors = Validator.iter_errors
    monkeypatch.setattr(Validator, "iter_errors", lambda self, instance: walked.append(instance) or iter_errors(self, instance))
    assert (list(validator.iter_errors({"repo": "a"})), validator.is_valid({"repo": "a"}), walked) == ([], True, [])
    # The check says yes to anything not an object, so it judges this one, not None.
    assert [error.message for error in validator.iter_errors({})] == ["'repo' is a required property"]
    assert validator.is_valid({"repo": 1}) is False
    assert walked == [{}, {"repo": 1}]


def test_validator_for_a_schema_that_does_not_compile_is_jsonschemas():
    validator = validator_for({"patternProperties": {"^x": {"type": "integer"}}})
    assert [error.message for error in validator.iter_errors({"xa": "s"})] == ["'s' is not of type 'integer'"]
    assert (validator.is_valid({"xa": "s"}), validator.is_valid({"xa": 1}), validator.is_valid({"y": "s"})) == (
        False, True, True)
