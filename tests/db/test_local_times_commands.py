"""``--local [ZONE]`` on the commands a person reads (runtime.management.local_times)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.helpers import tick

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_schedule_show_and_runs_read_in_the_zone_asked_and_json_stays_utc(registry_files):
    tick("2026-12-06T09:25:05Z")
    shown = run("schedule", "show", "heartbeat", "--local", "Australia/Lord_Howe")
    assert "2026-12-06T20:25:00+11:00" in shown and "2026-12-06T09:25:00Z" not in shown
    assert "2026-12-06T20:25:00+11:00" in run("schedule", "--local", "Australia/Lord_Howe", "show", "heartbeat")
    assert json.loads(run("schedule", "show", "heartbeat", "--json", "--local", "Europe/Budapest"))["lastSlotFired"] == (
        "2026-12-06T09:25:00Z")
    events = run("events", "--local", "Europe/Budapest")
    assert "clock:heartbeat:2026-12-06T09:25:00Z" in events  # an eventId is an identity: never rewritten


def test_an_unknown_zone_is_refused():
    with pytest.raises(CommandError) as caught:
        call_command("runs", "--local", "Mars/Olympus")
    assert str(caught.value) == "--local 'Mars/Olympus': not a time zone this host knows (an IANA name: Europe/Budapest)"


@pytest.mark.parametrize("command", [("runs", "--json"), ("doctor",), ("doctor", "--json"), ("events", "--json")])
def test_an_unknown_zone_is_refused_beside_json_too(registry_files, command):
    """JSON keeps UTC instants, but a zone that does not exist is bad input all the same (exit 2)."""
    with pytest.raises(CommandError) as caught:
        call_command(*command, "--local", "Mars/Olympus", stdout=StringIO())
    assert (str(caught.value), caught.value.returncode) == (
        "--local 'Mars/Olympus': not a time zone this host knows (an IANA name: Europe/Budapest)", 2,
    )


def columns(table: str) -> list[list[int]]:
    """Where each cell of each line starts: after two or more spaces, or at the line's start."""
    import re

    return [[0] + [m.end() for m in re.finditer(r" {2,}", line)] for line in table.splitlines()]


@pytest.mark.parametrize("command", [("events",), ("schedule", "list"), ("journal",)])
def test_a_table_in_a_zone_keeps_its_columns_aligned_and_the_next_command_reads_utc_again(registry_files, command):
    tick("2026-12-06T09:25:05Z")
    local = run(*command, "--local", "Europe/Budapest")
    assert "+01:00" in local
    starts = columns(local)
    assert all(line == starts[0] for line in starts[1:]), local
    assert "+01:00" not in run(*command)


def test_format_table_measures_the_cells_as_shown():
    from lib.text_table import cells_shown_as, format_table

    with cells_shown_as(str.upper):
        assert format_table(["A", "B"], [["xyz", "1"]]) == "A    B\nXYZ  1"
    assert format_table(["A", "B"], [["xyz", "1"]]) == "A    B\nxyz  1"


def test_local_without_a_zone_reads_in_the_zone_the_person_set_before_django_set_utc(registry_files, monkeypatch):
    tick("2026-12-06T09:25:05Z")
    monkeypatch.setenv("FACTORY_HOST_TZ", "Asia/Tokyo")  # manage.py keeps TZ here before Django sets it to UTC
    assert "2026-12-06T18:25:00+09:00" in run("schedule", "show", "heartbeat", "--local")
    monkeypatch.setenv("FACTORY_HOST_TZ", ":Asia/Kolkata")
    assert "2026-12-06T14:55:00+05:30" in run("schedule", "show", "heartbeat", "--local")
    monkeypatch.setenv("FACTORY_HOST_TZ", "JST-9")
    with pytest.raises(CommandError) as caught:
        run("schedule", "show", "heartbeat", "--local")
    assert str(caught.value) == ("--local: TZ='JST-9' is not a time zone this host knows (an IANA name: "
                                 "Europe/Budapest); name one: --local ZONE")


def test_local_without_a_zone_or_tz_reads_in_the_hosts_localtime(registry_files, monkeypatch, tmp_path):
    import shutil

    from runtime.management import local_times

    tick("2026-12-06T09:25:05Z")
    monkeypatch.setenv("FACTORY_HOST_TZ", "")
    localtime = tmp_path / "localtime"
    shutil.copyfile("/usr/share/zoneinfo/America/New_York", localtime)
    monkeypatch.setattr(local_times, "LOCALTIME", localtime)
    assert "2026-12-06T04:25:00-05:00" in run("schedule", "show", "heartbeat", "--local")
    monkeypatch.setattr(local_times, "LOCALTIME", tmp_path / "none")
    assert "2026-12-06T09:25:00+00:00" in run("schedule", "show", "heartbeat", "--local")
