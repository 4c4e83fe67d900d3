"""A person's note: the one check every decision, pause, resume and trigger makes (lib.notes)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lib.notes import NOTE_MAX_LENGTH, check_note
from lib.refusals import Refused


def refusal(note: str) -> tuple[str, str] | None:
    try:
        check_note(note, Refused)
    except Refused as exc:
        return exc.code, exc.detail
    return None


@pytest.mark.parametrize("note", ["", "agent failing since 09:00", "line one\r\nline two\ttabbed", "é ✓ 🚀", "x" * NOTE_MAX_LENGTH])
def test_plain_text_is_taken(note):
    assert refusal(note) is None


def test_a_note_one_character_too_long_is_refused_with_its_length():
    assert refusal("x" * 2001) == ("note_too_long", "the note has 2001 characters; at most 2000")


@pytest.mark.parametrize(("note", "code_point"), [
    ("\x1b[2J\x1b[Hcleared", "001B"), ("bell\x07", "0007"), ("\x01", "0001"), ("back\x08", "0008"),
    ("vt\x0b", "000B"), ("ff\x0c", "000C"), ("\x0e", "000E"), ("\x1f", "001F"), ("del\x7f", "007F"),
    ("csi\x9b31m", "009B"), ("\x80", "0080"), ("\x9f", "009F"),
    ("incident \u202e LTR", "202E"), ("\u202a", "202A"), ("\u2066isolate", "2066"), ("\u2069", "2069"),
])
def test_a_control_character_is_refused_and_named(note, code_point):
    assert refusal(note) == ("invalid_note", f"the note holds the control character U+{code_point}: "
                                             "write plain text (tabs and line breaks are kept)")


def test_nul_and_a_lone_surrogate_are_refused_with_their_own_reasons():
    assert refusal("a\x00b") == ("invalid_note", "the note holds U+0000 (NUL), which no journal entry can carry")
    assert refusal("a\ud800b") == ("invalid_note", "the note holds a lone surrogate, which is not Unicode text")


def test_the_first_character_past_the_c1_block_and_the_direction_marks_are_text():
    # A right-to-left mark (U+200F) is how RTL text is written; only the overrides reorder a line.
    assert refusal("\xa0non-breaking space") is None
    assert refusal("שלום\u200f 42 \u200e") is None


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"),
               max_size=NOTE_MAX_LENGTH))
def test_any_text_without_controls_or_surrogates_is_taken(note):
    assert refusal(note) is None
