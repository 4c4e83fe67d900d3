"""The approval API's JSON parser: the doors' strict JSON (docs/api.md, "Refusals").

DRF's ``JSONParser`` keeps the last of a key given twice (``{"note": "a", "note": "b"}``
would journal ``b``) and reads numbers beyond a double as infinity. A decision body is
read by ``lib.json_text.decode_json`` instead — a key twice, ``NaN``, ``1e400``, text that
is not UTF-8 or nests deeper than 64 levels is 400 ``parse_error``, as malformed JSON is.
"""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from lib.json_text import InvalidJson, decode_json


class StrictJSONParser(JSONParser):
    """``application/json`` bodies through ``decode_json``; 400 ``parse_error`` when it refuses."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return decode_json(stream.read())
        except InvalidJson as exc:
            raise ParseError(f"JSON parse error - {exc.detail}") from None
