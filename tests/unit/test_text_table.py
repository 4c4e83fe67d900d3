"""The commands' plain-text tables (lib/text_table.py)."""

import pytest

from lib.text_table import format_table


def test_columns_are_padded_to_their_widest_cell_two_spaces_apart_and_trailing_blanks_cut():
    assert format_table(["loop", "every", "next"], [["reaper", "1h", ""], ["heartbeat", "5m", "21:05"]]) == (
        "loop       every  next\n"
        "reaper     1h\n"
        "heartbeat  5m     21:05"
    )


def test_a_header_wider_than_every_cell_sets_its_column():
    assert format_table(["name", "x"], [["a", "1"]]) == "name  x\na     1"


def test_a_table_without_rows_is_its_header_line():
    assert format_table(["loop", "every"], []) == "loop  every"


def test_a_row_with_a_cell_more_than_the_headers_is_an_error_not_a_cell_dropped():
    with pytest.raises(ValueError, match="zip\\(\\) argument 2 is shorter than argument 1"):
        format_table(["loop"], [["reaper", "1h"]])
