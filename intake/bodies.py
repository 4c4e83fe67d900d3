"""Raw request bodies: read with a size cap, check the content type, decode JSON (DESIGN §10, §12).

The intake doors read the body themselves from the request stream, never through
``request.body`` or ``request.data``: a signature is over the bytes as received, and
Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check on ``request.body`` would answer 400 for a
large delivery instead of our 413 (or refuse a 20 MB GitHub delivery we must take).

Every refusal raises ``BodyRefused(status, code, detail)``; 413 and 415 are answered
``{error, detail}``, 422 ``{errors: [{code, detail}]}``.
"""

import json
from urllib.parse import parse_qs

from django.http import HttpRequest

#: 1 MiB: the cap of every JSON route but /github (DESIGN §10).
EVENTS_MAX_BODY_BYTES = 1024 * 1024
#: 25 MiB: GitHub caps a webhook delivery at 25 MB, and /github must take every delivery GitHub can send.
GITHUB_MAX_BODY_BYTES = 25 * 1024 * 1024
#: How deep decoded JSON may nest. Real envelopes and deliveries stay under ten levels;
#: the cap keeps validation and storage, which recurse, far from Python's recursion limit.
MAX_JSON_DEPTH = 64

JSON_CONTENT_TYPE = "application/json"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


class BodyRefused(Exception):
    """The body cannot be taken: ``status`` 413, 415 or 422 with a machine-readable ``code``."""

    def __init__(self, status: int, code: str, detail: str):
        self.status = status
        self.code = code
        self.detail = detail
        super().__init__(f"{status} {code}: {detail}")


def read_body(request: HttpRequest, limit: int) -> bytes:
    """The raw body of ``request``, at most ``limit`` bytes; raises ``BodyRefused(413)`` beyond.

    A declared ``Content-Length`` over the limit is refused before a byte is read; otherwise
    at most ``limit + 1`` bytes are read from the stream, so a body that is longer than it
    declared cannot make us buffer more than the cap.
    """
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyRefused(413, "payload_too_large", f"the body is {declared} bytes; this route takes at most {limit}")
    body = request.read(limit + 1)
    if len(body) > limit:
        raise BodyRefused(413, "payload_too_large", f"the body is over {limit} bytes; this route takes at most {limit}")
    return body


def media_type(request: HttpRequest) -> str:
    """The request's media type, lower-cased, without parameters (``charset`` and the like)."""
    return request.META.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()


def require_media_type(request: HttpRequest, accepted: tuple[str, ...]) -> str:
    """The request's media type if it is one of ``accepted``; raises ``BodyRefused(415)`` otherwise."""
    found = media_type(request)
    if found not in accepted:
        raise BodyRefused(
            415, "unsupported_media_type",
            f"Content-Type {found or '(none)'!r} is not accepted; send {' or '.join(accepted)}",
        )
    return found


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


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

    Refused with ``BodyRefused(422, "invalid_json")``: bytes that are not UTF-8, text that
    is not JSON, a key twice in one object, ``NaN``/``Infinity`` (Python accepts them, JSON and PostgreSQL do not),
    integers too long to convert, nesting deeper than ``MAX_JSON_DEPTH``.
    """
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw
        document = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicate_keys)
    except UnicodeDecodeError as exc:
        raise BodyRefused(422, "invalid_json", f"the body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    except RecursionError:
        raise BodyRefused(422, "invalid_json", f"the JSON nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        # JSONDecodeError, a NaN/Infinity constant, or an integer over Python's digit limit.
        raise BodyRefused(422, "invalid_json", f"the body is not JSON: {exc}") from None
    if _depth(document) > MAX_JSON_DEPTH:
        raise BodyRefused(422, "invalid_json", f"the JSON nests deeper than {MAX_JSON_DEPTH} levels")
    return document


def decode_form_payload(raw: bytes):
    """The JSON in the ``payload`` field of a GitHub form delivery (``application/x-www-form-urlencoded``).

    GitHub signs the raw form body, so the signature has been checked before this runs.
    Raises ``BodyRefused(422)``: ``malformed_payload`` when there is no single ``payload``
    field, ``invalid_json`` when its value is not JSON.
    """
    try:
        fields = parse_qs(raw.decode("ascii"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise BodyRefused(422, "malformed_payload", "a form body must be URL-encoded UTF-8 in ASCII") from None
    values = fields.get("payload", [])
    if len(values) != 1:
        raise BodyRefused(
            422, "malformed_payload", "a form-encoded delivery must carry its JSON in exactly one 'payload' field"
        )
    return decode_json(values[0])
