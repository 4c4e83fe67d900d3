"""The note a person writes with a decision, a pause, a resume or a trigger (docs/design.md §10).

A note is journaled and shown on pages and in the CLI's text, so it must be text every
database stores and every reader can print safely: at most ``NOTE_MAX_LENGTH`` characters,
no U+0000 (PostgreSQL cannot store it in text), no lone surrogate (JSON's ``"\\ud800"``,
which no database stores), and no control character but tab, line feed and carriage
return (an escape sequence in a note would act on the terminal of whoever runs
``journal`` or ``schedule show``), nor a bidirectional override or isolate (it would show the
note's words in another order).
"""

import re

from .refusals import Refused

#: The longest note, in characters.
NOTE_MAX_LENGTH = 2000

#: C0 controls but tab, LF and CR; DEL; C1 controls; and the bidirectional embeddings,
#: overrides and isolates (U+202A–U+202E, U+2066–U+2069), which make text read in an order
#: other than its own ("Trojan Source"): a journal entry must read as it was written.
_CONTROL = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def check_note(note: str, refusal: type[Refused]) -> None:
    """Raise ``refusal("note_too_long" | "invalid_note", detail)`` for a note no journal
    entry should carry; return None for a good one (the empty note included)."""
    if len(note) > NOTE_MAX_LENGTH:
        raise refusal("note_too_long", f"the note has {len(note)} characters; at most {NOTE_MAX_LENGTH}")
    if "\x00" in note:
        raise refusal("invalid_note", "the note holds U+0000 (NUL), which no journal entry can carry")
    control = _CONTROL.search(note)
    if control is not None:
        raise refusal("invalid_note", f"the note holds the control character U+{ord(control.group()):04X}: "
                                      "write plain text (tabs and line breaks are kept)")
    if not note.isascii():
        try:
            note.encode("utf-8")
        except UnicodeEncodeError:
            raise refusal("invalid_note", "the note holds a lone surrogate, which is not Unicode text") from None
