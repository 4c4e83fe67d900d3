"""The approval API's JSON parser: the doors' strict JSON and body reading (docs/api.md, "Refusals").

DRF's ``JSONParser`` keeps the last of a key given twice (``{"note": "a", "note": "b"}``
would journal ``b``) and reads numbers beyond a double as infinity. A decision body is
read by ``lib.json_text.decode_json`` instead — a key twice, ``NaN``, ``1e400``, text that
is not UTF-8 or nests deeper than 64 levels is 400 ``parse_error``, as malformed JSON is.

The body itself is read as the doors read theirs, by ``intake.bodies.read_body`` (capped at
Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``): a body that does not arrive within the server's
read deadline is 408 ``request_timeout``, one that ends before its ``Content-Length`` is 400
``bad_request``, one over the cap is 413 ``payload_too_large`` — each a ``Refused`` that
``ops.api.views.ApiView`` answers ``{error, detail}``, and nothing is decided. The parser is
a ``BaseParser``, not a ``JSONParser``: DRF reads a ``JSONParser``'s body itself through
``request.body``, where a stalled read would be a 500 and a short body would be taken.
"""

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from intake.bodies import JSON_CONTENT_TYPE, read_body
from lib.json_text import InvalidJson, decode_json


class StrictJSONParser(BaseParser):
    """``application/json`` bodies through ``read_body`` and ``decode_json``; 400 ``parse_error``
    when the JSON is refused."""

    media_type = JSON_CONTENT_TYPE

    def parse(self, stream, media_type=None, parser_context=None):
        raw = read_body(parser_context["request"]._request, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        try:
            return decode_json(raw)
        except InvalidJson as exc:
            raise ParseError(f"JSON parse error - {exc.detail}") from None
