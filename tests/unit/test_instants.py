"""Instants as event ids and payloads write them: RFC 3339, UTC, whole seconds (docs/design.md §5)."""


def test_slots_of_any_year_are_written_with_four_digits():
    from lib.instants import format_instant
    from tests.conftest import at

    assert format_instant(at("0001-01-01T00:00:00Z")) == "0001-01-01T00:00:00Z"
    assert format_instant(at("2026-11-30T21:00:00.999Z")) == "2026-11-30T21:00:00Z"
