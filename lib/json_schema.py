"""The one JSON Schema validator every schema of the runtime is checked with (docs/design.md §4).

JSON Schema's ``pattern`` and ``patternProperties`` are ECMA-262 regular expressions,
in which ``$`` (without the multiline flag, which JSON Schema never sets) matches only at
the very end of the text. Python's ``re`` lets ``$`` also match before a final newline,
so ``"^[a-z]+$"`` would accept ``"hello\\n"``. ``Validator`` is Draft 2020-12 with those two
keywords compiling each pattern through ``python_pattern``, which turns every unescaped
``$`` outside a character class into ``\\Z``; the schema files themselves (and so the
registry digest) stay as written.
"""

import re
from functools import lru_cache

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend


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

