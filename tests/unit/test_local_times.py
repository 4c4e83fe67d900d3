"""``--local``: a person's commands show instants in a zone (lib.instants.localize_text; docs/design.md §10)."""

import time
from zoneinfo import ZoneInfo

import pytest

from lib.instants import localize_text


def test_every_utc_instant_in_the_text_reads_in_the_zone_with_its_own_offset():
    text = "slot 2026-12-06T09:25:00Z, then 2026-07-01T09:25:00.5Z; 2026-12-06 09:25:00 UTC is left alone"
    assert localize_text(text, ZoneInfo("Australia/Lord_Howe")) == (
        "slot 2026-12-06T20:25:00+11:00, then 2026-07-01T19:55:00.500000+10:30; 2026-12-06 09:25:00 UTC is left alone")


def test_without_a_zone_the_hosts_zone_decides(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Budapest")
    time.tzset()
    try:
        assert localize_text("2026-12-06T09:25:00Z / 2026-07-01T09:25:00Z") == (
            "2026-12-06T10:25:00+01:00 / 2026-07-01T11:25:00+02:00")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.parametrize("text", [
    "", "no instant", "2026-12-06T09:25:00+01:00", "x2026-12-06T09:25:00Zx", "clock:heartbeat:2026-12-06T09:25:00Z",
    "manual:reaper:2026-12-06T09:25:00Z", "runs/2026-12-06T09:25:00Z.log",
])
def test_text_without_a_utc_instant_is_unchanged(text):
    assert localize_text(text, ZoneInfo("Europe/Budapest")) == text
