"""JSON Pointer, the edges' way into a run's input and output: RFC 6901 to the letter (docs/design.md §4)."""

import pytest

from lib.json_pointer import PointerNotFound, resolve_pointer

RFC_6901_DOCUMENT = {
    "foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4, "i\\j": 5, 'k"l': 6, " ": 7, "m~n": 8,
}


@pytest.mark.parametrize("pointer, value", [
    ("", RFC_6901_DOCUMENT), ("/foo", ["bar", "baz"]), ("/foo/0", "bar"), ("/", 0), ("/a~1b", 1), ("/c%d", 2),
    ("/e^f", 3), ("/g|h", 4), ("/i\\j", 5), ('/k"l', 6), ("/ ", 7), ("/m~0n", 8),
])
def test_pointers_resolve_as_rfc_6901_section_5_says(pointer, value):
    assert resolve_pointer(RFC_6901_DOCUMENT, pointer) == value


@pytest.mark.parametrize("pointer", ["/foo/2", "/foo/01", "/foo/-", "/foo/0/0", "/missing", "/m~2n", "foo", "/c%25d"])
def test_pointers_that_find_nothing_say_so(pointer):
    with pytest.raises(PointerNotFound):
        resolve_pointer(RFC_6901_DOCUMENT, pointer)
