"""RFC 3339 instants into UTC (lib/instants.py): the exact refusals, and the one UTC."""

from datetime import UTC, datetime

import pytest

from lib.instants import InstantError, parse_instant


def test_an_instant_with_an_offset_is_the_same_moment_in_utc_itself():
    value = parse_instant("2026-11-30T10:00:00+01:00")
    # ``datetime.UTC`` itself, not the local zone nor a zone equal to it: code compares with ``is``.
    assert (value, value.tzinfo is UTC) == (datetime(2026, 11, 30, 9, 0, tzinfo=UTC), True)


def test_a_lower_case_t_and_z_are_rfc_3339_too():
    # RFC 3339 §5.6 allows them; Python 3.11's fromisoformat reads only "Z".
    assert parse_instant("2026-11-30t09:00:00z") == datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, message", [
    ("2026-02-30T00:00:00Z", "'2026-02-30T00:00:00Z' is not an RFC 3339 date-time: day is out of range for month"),
    ("9999-12-31T23:59:59-01:00", "'9999-12-31T23:59:59-01:00' is out of range in UTC"),
])
def test_a_date_time_of_the_grammar_that_is_no_instant_is_refused_by_name(text, message):
    with pytest.raises(InstantError) as raised:
        parse_instant(text)
    assert str(raised.value) == message
