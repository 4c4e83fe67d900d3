"""The operator's pages read a figure in their query string only in ASCII digits: anything else
reads as none (the first page, a stale list), never as another number (docs/web.md)."""

import pytest

from ops.web.live import _seen
from ops.web.timeline import parse_before


@pytest.mark.parametrize(("text", "read"), [
    ("12", 12), ("1", 1), ("9223372036854775807", 9223372036854775807),
    ("\u0661\u0662", None), ("\u00b2", None), ("0", None), ("-3", None), ("abc", None), ("", None), (None, None),
    ("1" * 20, None),
])
def test_before_is_an_event_id_in_ascii_digits_or_the_first_page(text, read):
    assert parse_before(text) == read


@pytest.mark.parametrize(("text", "read"), [("2", 2), ("0", 0), ("\u0661\u0662", None), ("\u00b2", None), ("x", None)])
def test_a_seen_figure_of_the_inbox_watcher_is_ascii_digits_or_none(text, read):
    assert _seen(text) == read
