"""A schema compiled to one yes/no function, for the documents that pass it (docs/design.md §4;
docs/performance.md, "Signed intake").

``lib.json_schema.Validator`` (jsonschema) walks a schema keyword by keyword and builds a
validator object for every subschema it descends into: about 100 µs for an envelope and
its payload, paid by every request to a door. ``compile_check(schema)`` turns a schema made
only of the plain keywords below into nested closures that answer ``is_valid`` in a few
microseconds, and returns None for any other schema (``$ref``, ``allOf``, ``if``,
``uniqueItems``, ``patternProperties``, an ``enum`` or ``const`` that is not all strings,
an unknown keyword …), which keeps jsonschema alone.

Handled, with jsonschema's Draft 2020-12 meaning: ``type`` (one name or a list),
``properties``, ``required``, ``additionalProperties`` (a boolean or a schema), ``items``
(a schema, no ``prefixItems``), ``minItems``, ``maxItems``, ``minLength``, ``maxLength``,
``pattern`` (end-anchored, ``lib.json_schema.compiled``), ``minimum``, ``maximum``,
``const`` and ``enum`` of strings, and the annotations ``ANNOTATIONS``; ``true`` and
``false`` schemas. A keyword applies only to instances of its type, as in jsonschema.
"""

import numbers
from collections.abc import Callable

Check = Callable[[object], bool]

#: Keywords that assert nothing here (``format`` is an annotation: no format checker is used).
ANNOTATIONS = frozenset(
    {"$schema", "$comment", "title", "description", "default", "examples", "format", "deprecated", "readOnly",
     "writeOnly"})


def _is_integer(value) -> bool:
    # Draft 6 and later: 1.0 is an integer; True is not (bool is an int in Python).
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


TYPES: dict[str, Check] = {
    "string": lambda value: isinstance(value, str),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "integer": _is_integer,
    "number": _is_number,
}

#: Every keyword ``compile_check`` handles.
HANDLED = ANNOTATIONS | {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
    "maxLength", "pattern", "minimum", "maximum", "const", "enum"}


def compile_check(schema) -> Check | None:
    """``schema``'s ``is_valid`` as one function, or None when it uses anything not handled."""
    if schema is True or schema is False:
        return lambda value, answer=schema: answer
    if not isinstance(schema, dict) or not HANDLED.issuperset(schema):
        return None
    checks = []
    for build in (_type, _object, _array, _string, _number, _constant):
        check = build(schema)
        if check is None:
            return None
        if check is not _nothing:
            checks.append(check)
    return _all(checks)


def _all(checks: list[Check]) -> Check:
    """True when every one of ``checks`` is (loops, not generators: this runs per subschema)."""
    if not checks:
        return _nothing
    if len(checks) == 1:
        return checks[0]

    def check(value) -> bool:
        for each in checks:
            if not each(value):
                return False
        return True

    return check


def _nothing(value) -> bool:
    """A keyword group the schema does not use."""
    return True


def _type(schema) -> Check | None:
    if "type" not in schema:
        return _nothing
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not all(isinstance(name, str) and name in TYPES for name in names):
        return None
    checks = [TYPES[name] for name in names]
    if len(checks) == 1:
        return checks[0]
    return lambda value: any(check(value) for check in checks)


def _object(schema) -> Check | None:
    properties, required = schema.get("properties", {}), schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not (properties or required or additional is not True):
        return _nothing
    subchecks = {name: compile_check(subschema) for name, subschema in properties.items()}
    extra = additional if isinstance(additional, bool) else compile_check(additional)
    if None in subchecks.values() or extra is None:
        return None

    def check(value) -> bool:
        if not isinstance(value, dict):
            return True
        if not all(name in value for name in required):
            return False
        for name, item in value.items():
            sub = subchecks.get(name)
            if sub is None:
                if extra is False or (extra is not True and not extra(item)):
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _array(schema) -> Check | None:
    if not {"items", "minItems", "maxItems"} & set(schema):
        return _nothing
    item_check = compile_check(schema.get("items", True))
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    if item_check is None:
        return None
    return lambda value: not isinstance(value, list) or (
        len(value) >= low and (high is None or len(value) <= high) and all(item_check(item) for item in value))


def _string(schema) -> Check | None:
    if not {"minLength", "maxLength", "pattern"} & set(schema):
        return _nothing
    # Imported here: lib.json_schema imports this module.
    from lib.json_schema import compiled

    low, high = schema.get("minLength", 0), schema.get("maxLength")
    pattern = compiled(schema["pattern"]) if "pattern" in schema else None
    return lambda value: not isinstance(value, str) or (
        len(value) >= low and (high is None or len(value) <= high) and (pattern is None or pattern.search(value) is not None))


def _number(schema) -> Check | None:
    if not {"minimum", "maximum"} & set(schema):
        return _nothing
    low, high = schema.get("minimum"), schema.get("maximum")
    return lambda value: not _is_number(value) or (
        (low is None or not value < low) and (high is None or not value > high))


def _constant(schema) -> Check | None:
    enum = schema.get("enum", [])
    values = ([schema["const"]] if "const" in schema else []) + (enum if isinstance(enum, list) else [None])
    if not all(isinstance(value, str) for value in values):
        return None
    checks = []
    if "const" in schema:
        checks.append(lambda value, const=schema["const"]: value == const)
    if "enum" in schema:
        checks.append(lambda value, members=list(schema["enum"]): value in members)
    return _all(checks)
