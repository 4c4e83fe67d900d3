"""The one JSON Schema validator every schema of the runtime is checked with (docs/design.md §4).

JSON Schema's ``pattern`` and ``patternProperties`` are ECMA-262 regular expressions,
in which ``$`` (without the multiline flag, which JSON Schema never sets) matches only at
the very end of the text. Python's ``re`` lets ``$`` also match before a final newline,
so ``"^[a-z]+$"`` would accept ``"hello\\n"``. ``Validator`` is Draft 2020-12 with those two
keywords compiling each pattern through ``python_pattern``, which turns every unescaped
``$`` outside a character class into ``\\Z``; the schema files themselves (and so the
registry digest) stay as written.

A validator is built once per schema: ``validator_for(schema)`` returns the cached one
(keyed by the schema object, whose registry holds it for as long as it is in force), so
admission, planning and the adapters never rebuild one per envelope, payload or result.
It is a ``CheckedValidator``: a schema of plain keywords is also compiled to one yes/no
function (``lib.json_schema_fast``), and a document it accepts has no errors without
jsonschema's walk; any other document, or schema, is jsonschema's to judge, so every error
and its message are jsonschema's.
"""

import re
import threading
from collections import OrderedDict
from functools import lru_cache

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend

from lib.json_schema_fast import Check, compile_check


def python_pattern(pattern: str) -> str:
    """``pattern`` (ECMA-262) with every unescaped ``$`` outside ``[...]`` written ``\\Z``.

    ``"^a$"`` → ``"^a\\Z"``; ``"^a\\$"`` and ``"^[$]"`` are unchanged.
    """
    out = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return "".join(out)


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> re.Pattern:
    """``pattern`` compiled as JSON Schema means it (see ``python_pattern``)."""
    return re.compile(python_pattern(pattern))


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if compiled(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


#: Draft 2020-12 with end-anchored patterns: every validator of the runtime is one of these.
Validator = extend(Draft202012Validator, validators={"pattern": _pattern, "patternProperties": _pattern_properties})


class CheckedValidator:
    """A ``Validator`` whose ``iter_errors`` and ``is_valid`` first ask the schema's compiled
    check, when it has one (the module's docstring); everything else is the ``Validator``'s."""

    def __init__(self, validator: Validator, check: Check | None):
        self._validator, self._check = validator, check

    def __getattr__(self, name):
        return getattr(self._validator, name)

    def iter_errors(self, instance):
        if self._check is not None and self._check(instance):
            return iter(())
        return self._validator.iter_errors(instance)

    def is_valid(self, instance) -> bool:
        if self._check is not None and self._check(instance):
            return True
        return self._validator.is_valid(instance)


#: How many schemas keep a cached validator: every schema of the registries a process has
#: held recently (a few dozen each), with room to spare; the oldest go first.
VALIDATOR_CACHE_SIZE = 4096
# id(schema) → (schema, validator): the entry holds the schema, so the id stays its own.
_validators: OrderedDict[int, tuple[object, CheckedValidator]] = OrderedDict()
_validators_lock = threading.Lock()


def validator_for(schema: dict | bool) -> CheckedValidator:
    """The ``CheckedValidator`` of ``schema``, built on first use and cached by the schema object.

    The schema must not be changed after its first use (the registry's never are).
    Validators are immutable: one may serve many threads at once.
    """
    with _validators_lock:
        found = _validators.get(id(schema))
        if found is not None and found[0] is schema:
            _validators.move_to_end(id(schema))
            return found[1]
    validator = CheckedValidator(Validator(schema), compile_check(schema))
    with _validators_lock:
        _validators[id(schema)] = (schema, validator)
        while len(_validators) > VALIDATOR_CACHE_SIZE:
            _validators.popitem(last=False)
    return validator
