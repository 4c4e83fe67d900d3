"""Strict JSON decoding (lib/json_text.py): what the doors refuse as 422 ``invalid_json``."""

import pytest

from lib.json_text import InvalidJson, decode_json


@pytest.mark.parametrize("text", ["1e400", "-1e400", '{"a": 1e400}', '{"a": [1.5e999]}'])
def test_a_number_beyond_a_double_is_invalid_json(text):
    with pytest.raises(InvalidJson) as refused:
        decode_json(text)
    assert (refused.value.code, refused.value.status) == ("invalid_json", 422)
    assert "too large for a 64-bit float" in refused.value.detail


def test_large_but_finite_numbers_are_kept():
    assert decode_json('{"a": 1e308, "b": -2.5e-300, "c": 12345678901234567890}') == {
        "a": 1e308, "b": -2.5e-300, "c": 12345678901234567890,
    }


def test_an_integer_longer_than_the_digit_limit_is_refused_in_the_runtimes_words():
    assert decode_json("1" * 4300) == int("1" * 4300)
    with pytest.raises(InvalidJson, match="the body is not JSON: an integer of 4301 digits is longer than 4300") as caught:
        decode_json('{"n": -' + "1" * 4301 + "}")
    assert "sys.set_int_max_str_digits" not in str(caught.value)
