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


@pytest.mark.parametrize("pointer, detail", [
    ("/foo/2", "/foo has no element '2' (length 2)"),
    ("/foo/01", "/foo has no element '01' (length 2)"),
    ("/foo/-", "/foo has no element '-' (length 2)"),
    ("/foo/0/0", "/foo/0 is a str, not an object or array"),
    ("/missing", "/ has no member 'missing'"),
    ("/m~2n", "'m~2n' has a '~' that is not '~0' or '~1'"),
    ("foo", "a JSON Pointer is empty or starts with '/'"),
    ("/c%25d", "/ has no member 'c%25d'"),
    # Where it stopped is written as the pointer writes it, escapes and all.
    ("/a~1b/c", "/a~1b is a int, not an object or array"),
])
def test_pointers_that_find_nothing_say_so(pointer, detail):
    with pytest.raises(PointerNotFound) as info:
        resolve_pointer(RFC_6901_DOCUMENT, pointer)
    assert (info.value.pointer, info.value.detail, str(info.value)) == (pointer, detail, f"{pointer}: {detail}")


def test_a_pointer_that_stops_deep_names_the_members_it_walked():
    with pytest.raises(PointerNotFound) as info:
        resolve_pointer({"x": {"y": {"z": 1}}}, "/x/y/w")
    assert info.value.detail == "/x/y has no member 'w'"
