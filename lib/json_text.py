"""JSON text: strict decoding of what arrives, canonical encoding of what is compared or hashed."""

import json
import math

from .refusals import Refused

#: How deep decoded JSON may nest. Real envelopes and deliveries stay under ten levels;
#: the cap keeps validation and storage, which recurse, far from Python's recursion limit.
MAX_JSON_DEPTH = 64


class InvalidJson(Refused):
    """Text that is not strict JSON: code ``invalid_json``, answered 422 by the HTTP doors."""

    status = 422

    def __init__(self, detail: str):
        super().__init__("invalid_json", detail)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    """A JSON number as a float; one too large for a double (``1e400``) is refused, not read as
    infinity, which neither JSON nor PostgreSQL's jsonb can store, and so is one too small for it
    (``1e-400``), which would be stored as 0: a signed body's number is kept or refused, never
    changed."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text} is too large for a 64-bit float")
    if value == 0 and any(digit in "123456789" for digit in text.partition("e")[0].partition("E")[0]):
        raise ValueError(f"the number {text} is too small for a 64-bit float")
    return value


#: Most digits a JSON integer may have: Python's own limit for converting text to an integer.
MAX_INT_DIGITS = 4300


def _bounded_int(text: str) -> int:
    """A JSON integer; one longer than ``MAX_INT_DIGITS`` digits is refused in the runtime's words."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits is longer than {MAX_INT_DIGITS}")
    return int(text)


def _depth(document) -> int:
    """How deep ``document`` nests (a scalar is 0), without recursion."""
    deepest, stack = 0, [(document, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            level += 1
            deepest = max(deepest, level)
            stack.extend((child, level) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _refuse_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    """A signed body must mean one thing: with a key twice, parsers disagree on which wins."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"the key {duplicate!r} appears twice in one object")
    return document


def decode_json(raw: bytes | str):
    """Parse strict JSON text (UTF-8 bytes or str) into Python values.

    Raises ``InvalidJson`` (code ``invalid_json``, status 422): bytes that are not UTF-8, text that
    is not JSON, a key twice in one object, ``NaN``/``Infinity`` or a number beyond a double (``1e400``, ``1e-400``) (Python accepts them, JSON and PostgreSQL do not),
    integers too long to convert, nesting deeper than ``MAX_JSON_DEPTH``.
    """
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
        document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int, object_pairs_hook=_refuse_duplicate_keys)
    except UnicodeDecodeError as exc:
        raise InvalidJson(f"the body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    except RecursionError:
        raise InvalidJson(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        # JSONDecodeError, a NaN/Infinity constant, a number too large.
        raise InvalidJson(f"the body is not JSON: {exc}") from None
    # Every container opens with "[" or "{" in the text, so their count bounds the depth: a
    # document of at most MAX_JSON_DEPTH of them (an envelope has a handful) needs no walk.
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and _depth(document) > MAX_JSON_DEPTH:
        raise InvalidJson(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels")
    return document


def canonical_json(data) -> str:
    """Sorted keys, no whitespace: the form the digest and content comparisons use."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
