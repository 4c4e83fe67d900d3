"""RFC 6901 JSON Pointer evaluation over parsed JSON (docs/design.md §4 edges, §6 keyed schedules)."""

import re

#: An array index token of RFC 6901 §4: ``0`` or digits without a leading zero.
ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
#: A ``~`` not followed by ``0`` or ``1`` is not a valid escape (RFC 6901 §3).
BAD_ESCAPE = re.compile(r"~(?![01])")


class PointerNotFound(LookupError):
    """An RFC 6901 pointer that finds nothing in the document; ``detail`` says where it stopped."""

    def __init__(self, pointer: str, detail: str):
        self.pointer = pointer
        self.detail = detail
        super().__init__(f"{pointer}: {detail}")


def resolve_pointer(document, pointer: str):
    """Evaluate an RFC 6901 JSON Pointer against ``document`` (parsed JSON) and return the value.

    ``""`` is the whole document; each ``/``-separated token is unescaped (``~1`` → ``/``,
    then ``~0`` → ``~``) and looks up an object member, or an array index written without
    leading zeros. Raises PointerNotFound for a missing member, an index out of range or
    not an index (``-`` included: it names the element after the last), a step into a
    scalar, or a malformed pointer. ``referencing``'s resolver is not used: it reads URI
    fragments (percent-decoding them) and would index into strings.
    """
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise PointerNotFound(pointer, "a JSON Pointer is empty or starts with '/'")
    value = document
    walked = ""
    for raw in pointer[1:].split("/"):
        if BAD_ESCAPE.search(raw):
            raise PointerNotFound(pointer, f"{raw!r} has a '~' that is not '~0' or '~1'")
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            if token not in value:
                raise PointerNotFound(pointer, f"{walked or '/'} has no member {token!r}")
            value = value[token]
        elif isinstance(value, list):
            if not ARRAY_INDEX.fullmatch(token) or int(token) >= len(value):
                raise PointerNotFound(pointer, f"{walked or '/'} has no element {token!r} (length {len(value)})")
            value = value[int(token)]
        else:
            raise PointerNotFound(pointer, f"{walked or '/'} is a {type(value).__name__}, not an object or array")
        walked += "/" + raw
    return value
