"""Strict JSON decoding (lib/json_text.py): what the doors refuse as 422 ``invalid_json``."""

import pytest

from lib.json_text import MAX_JSON_DEPTH, InvalidJson, _depth, canonical_json, decode_json


@pytest.mark.parametrize("text", ["1e400", "-1e400", '{"a": 1e400}', '{"a": [1.5e999]}'])
def test_a_number_beyond_a_double_is_invalid_json(text):
    with pytest.raises(InvalidJson) as refused:
        decode_json(text)
    assert (refused.value.code, refused.value.status) == ("invalid_json", 422)
    assert "too large for a 64-bit float" in refused.value.detail


@pytest.mark.parametrize("text", ["1e-400", "-2.5E-999", '{"a": [0.0001e-330]}'])
def test_a_nonzero_number_too_small_for_a_double_is_refused_not_stored_as_zero(text):
    with pytest.raises(InvalidJson) as refused:
        decode_json(text)
    assert (refused.value.code, refused.value.status) == ("invalid_json", 422)
    assert "too small for a 64-bit float" in refused.value.detail


def test_zeros_written_any_way_and_the_smallest_doubles_are_kept():
    assert decode_json('[0.0, -0.0, 0e-400, 0.000E+5, 5e-324, 2.2250738585072014e-308]') == [
        0.0, -0.0, 0.0, 0.0, 5e-324, 2.2250738585072014e-308,
    ]


def test_large_but_finite_numbers_are_kept():
    assert decode_json('{"a": 1e308, "b": -2.5e-300, "c": 12345678901234567890}') == {
        "a": 1e308, "b": -2.5e-300, "c": 12345678901234567890,
    }


def test_an_integer_longer_than_the_digit_limit_is_refused_in_the_runtimes_words():
    assert decode_json("1" * 4300) == int("1" * 4300)
    with pytest.raises(InvalidJson, match="the body is not JSON: an integer of 4301 digits is longer than 4300") as caught:
        decode_json('{"n": -' + "1" * 4301 + "}")
    assert "sys.set_int_max_str_digits" not in str(caught.value)


def test_the_refusal_is_invalid_json_answered_422():
    refusal = InvalidJson("the body is not JSON: x")
    assert (refusal.code, refusal.detail, refusal.status, str(refusal)) == (
        "invalid_json", "the body is not JSON: x", 422, "invalid_json: the body is not JSON: x",
    )


def detail(raw):
    with pytest.raises(InvalidJson) as refused:
        decode_json(raw)
    assert (refused.value.code, refused.value.status) == ("invalid_json", 422)
    return refused.value.detail


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_by_name(constant):
    assert detail(f'{{"a": [{constant}]}}') == f"the body is not JSON: {constant} is not JSON"


def test_a_number_beyond_a_double_is_refused_with_its_text():
    assert detail('{"a": 1.5e999}') == "the body is not JSON: the number 1.5e999 is too large for a 64-bit float"


def test_numbers_keep_their_type_and_value():
    document = decode_json('[1.5, -0.25, 7, -7, 0]')
    assert document == [1.5, -0.25, 7, -7, 0]
    assert [type(n) for n in document] == [float, float, int, int, int]


def test_a_key_twice_is_refused_naming_the_key_repeated():
    # The first key is not the repeated one: the message names the one seen twice.
    assert detail('{"a": 1, "b": 2, "b": 3}') == "the body is not JSON: the key 'b' appears twice in one object"
    assert detail('{"x": {"c": 1, "d": 2, "c": 1}}') == "the body is not JSON: the key 'c' appears twice in one object"
    assert decode_json('{"a": {"b": 1}, "b": {"a": 2}}') == {"a": {"b": 1}, "b": {"a": 2}}


def test_text_that_is_not_json_is_refused_with_the_parsers_words():
    assert detail("{") == "the body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"


def test_bytes_are_utf8_with_an_optional_byte_order_mark():
    assert decode_json('{"name": "é"}'.encode()) == {"name": "é"}
    assert decode_json('\ufeff{"name": "é"}'.encode()) == {"name": "é"}
    assert decode_json('{"name": "é"}') == {"name": "é"}


def test_bytes_that_are_not_utf8_are_refused_with_the_place():
    assert detail(b'{"a": "\xff"}') == "the body is not UTF-8: invalid start byte at byte 7"
    # Python's json would read UTF-16 (and lone surrogates) from bytes; the doors take UTF-8 only.
    assert detail('{"a": 1}'.encode("utf-16")) == "the body is not UTF-8: invalid start byte at byte 0"
    assert detail(b'"\xed\xa0\x80"') == "the body is not UTF-8: invalid continuation byte at byte 1"


def nested(levels, *, kind):
    text = "1"
    for _ in range(levels):
        text = f"[{text}]" if kind == "list" else f'{{"k": {text}}}'
    return text


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_nesting_up_to_the_cap_is_kept_and_one_level_more_is_refused(kind):
    assert _depth(decode_json(nested(MAX_JSON_DEPTH, kind=kind))) == MAX_JSON_DEPTH == 64
    assert detail(nested(MAX_JSON_DEPTH + 1, kind=kind)) == "the JSON nests deeper than 64 levels"


def test_nesting_past_pythons_recursion_limit_is_refused_in_the_same_words():
    assert detail("[" * 100_000 + "]" * 100_000) == "the JSON nests deeper than 64 levels"


def test_brackets_in_strings_count_toward_the_walk_but_not_toward_the_depth(monkeypatch):
    import lib.json_text

    walks = []
    real = lib.json_text._depth
    monkeypatch.setattr(lib.json_text, "_depth", lambda document: walks.append(1) or real(document))
    assert decode_json('{"a": [1, {"b": "{[{["}]}') == {"a": [1, {"b": "{[{["}]}
    assert walks == []  # 7 brackets: the document cannot nest deeper than 7
    shallow = '{"text": "' + "[" * 100 + '"}'
    assert decode_json(shallow) == {"text": "[" * 100}
    assert walks == [1]  # 101 brackets: walked, 1 level deep, kept


def test_depth_counts_containers_not_scalars():
    assert [_depth(d) for d in (5, "s", None, [], {}, [1, [2]], {"a": [1, {"b": {}}], "c": 1}, [[], [[[]]], {}])] == [
        0, 0, 0, 1, 1, 2, 4, 4,
    ]


def test_canonical_json_sorts_keys_without_whitespace_or_escapes():
    assert canonical_json({"b": [1, "é", None], "a": {"d": True, "c": 1.5}}) == '{"a":{"c":1.5,"d":true},"b":[1,"é",null]}'
