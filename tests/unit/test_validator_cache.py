"""One validator per schema (docs/design.md §4): admission, planning and the adapters reuse it."""

from unittest import mock

import lib.json_schema
from lib.json_schema import Validator, validator_for


def test_a_schema_gets_one_validator_however_often_it_is_asked_for():
    schema = {"type": "object", "properties": {"repo": {"type": "string", "pattern": "^[a-z]+$"}}}
    with mock.patch.object(lib.json_schema, "Validator", wraps=Validator) as built:
        first = validator_for(schema)
        assert all(validator_for(schema) is first for _ in range(100))
    assert built.call_count == 1
    assert first.is_valid({"repo": "factory"}) and not first.is_valid({"repo": "factory\n"})


def test_an_equal_but_distinct_schema_gets_its_own_validator():
    one, other = {"type": "integer"}, {"type": "integer"}
    assert validator_for(one) is not validator_for(other)
    assert validator_for(one).schema is one and validator_for(other).schema is other


def test_the_cache_keeps_at_most_its_size_and_drops_the_oldest(monkeypatch):
    monkeypatch.setattr(lib.json_schema, "VALIDATOR_CACHE_SIZE", 3)
    monkeypatch.setattr(lib.json_schema, "_validators", type(lib.json_schema._validators)())
    schemas = [{"const": n} for n in range(4)]
    validators = [validator_for(s) for s in schemas]
    assert len(lib.json_schema._validators) == 3
    assert validator_for(schemas[3]) is validators[3]
    assert validator_for(schemas[0]) is not validators[0]
