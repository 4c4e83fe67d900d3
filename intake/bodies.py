"""Raw request bodies: read with a size cap, check the content type, decode JSON (docs/design.md §10, §12).

The intake doors read the body themselves from the request stream, never through
``request.body`` or ``request.data``: a signature is over the bytes as received, and
Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` check on ``request.body`` would answer 400 for a
large delivery instead of our 413 (or refuse a 20 MB GitHub delivery we must take).

Every refusal raises a ``Refused`` with its HTTP status: ``BodyRefused`` (408, 413, 415, 422
``malformed_payload``) or ``lib.json_text.InvalidJson`` (422); 408, 413 and 415 are answered
``{error, detail}``, 422 ``{errors: [{code, detail}]}``.
"""

from urllib.parse import parse_qs

from django.http import HttpRequest, UnreadablePostError

from lib.json_text import decode_json
from lib.refusals import Refused

#: 1 MiB: the cap of every JSON route but /github (docs/design.md §10).
EVENTS_MAX_BODY_BYTES = 1024 * 1024
#: 25 MiB: GitHub caps a webhook delivery at 25 MB, and /github must take every delivery GitHub can send.
GITHUB_MAX_BODY_BYTES = 25 * 1024 * 1024

JSON_CONTENT_TYPE = "application/json"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


class BodyRefused(Refused):
    """The body cannot be taken: ``status`` 413, 415 or 422 with a machine-readable ``code``."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(code, detail, status=status)


def read_body(request: HttpRequest, limit: int) -> bytes:
    """The raw body of ``request``, at most ``limit`` bytes; raises ``BodyRefused(413)`` beyond,
    and ``BodyRefused(408)`` ``request_timeout`` when the body does not arrive within the
    server's read deadline (``FACTORY_HTTP_READ_SECONDS``, docs/design.md §10).

    A declared ``Content-Length`` over the limit is refused before a byte is read; otherwise
    at most ``limit + 1`` bytes are read from the stream, so a body that is longer than it
    declared cannot make us buffer more than the cap. A body shorter than its
    ``Content-Length`` (the client closed its side early) is ``BodyRefused(400)``
    ``bad_request``: nothing of it is admitted.
    """
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyRefused(413, "payload_too_large", f"the body is {declared} bytes; this route takes at most {limit}")
    try:
        body = request.read(limit + 1)
    except UnreadablePostError as exc:
        # Django wraps the read's error; a TimeoutError is the server's read deadline
        # (factory_site.http_worker): a slow client is dropped. Anything else is a fault.
        if not isinstance(exc.__cause__, TimeoutError):
            raise
        raise BodyRefused(
            408, "request_timeout", "the body did not arrive within the server's read time-out; send it again"
        ) from None
    if len(body) > limit:
        raise BodyRefused(413, "payload_too_large", f"the body is over {limit} bytes; this route takes at most {limit}")
    if len(body) < declared:
        # The client ended its side of the connection before the body was whole.
        raise BodyRefused(
            400, "bad_request", f"the body ended after {len(body)} of the {declared} bytes its Content-Length declared"
        )
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
