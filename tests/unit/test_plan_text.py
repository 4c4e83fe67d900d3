"""A plan in words and the inbox's times (runtime.plan_text, runtime.admin.common)."""

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone as django_timezone

from runtime.admin.common import between, duration, instant
from runtime.plan_text import describe_plan, what_it_does, what_runs

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"


def test_a_command_reads_as_its_command_line_with_the_run_placeholders_as_written():
    plan = {
        "definition": "reaper@1", "adapter": "command", "argv": ["python3", "reaper.py", "--root", "a b", "--run", "{runDir}"],
        "input": {"loop": "reaper"}, "mutating": True, "timeoutSeconds": 300, "maxAttempts": 2,
    }
    assert describe_plan(plan) == [
        ("what runs", "python3 reaper.py --root 'a b' --run '{runDir}'"),
        ("input", '{"loop": "reaper"}'),
        ("mutates", "yes: it changes things outside the runtime; an interrupted attempt waits for a person"),
        ("time-out", "300 s"),
        ("attempts", "2"),
    ]


def test_an_agent_reads_as_its_definition_and_the_work_it_is_handed():
    plan = {
        "definition": "merge-scan@1", "adapter": "agent", "argv": None, "mutating": False,
        "input": {"repo": "alpha", "prNumbers": [7, 8], "headSha": SHA, "ticket": "T-7"},
    }
    assert describe_plan(plan)[:6] == [
        ("what runs", "the agent merge-scan@1"), ("repository", "alpha"), ("pull requests", "7, 8"),
        ("head SHA", SHA), ("ticket", "T-7"),
        ("input", f'{{"headSha": "{SHA}", "prNumbers": [7, 8], "repo": "alpha", "ticket": "T-7"}}'),
    ]
    assert describe_plan(plan)[6] == ("mutates", "no: read-only")


@pytest.mark.parametrize("plan, words", [
    ({"adapter": "builtin", "builtin": "health", "definition": "heartbeat@1"},
     "the built-in health report, inside the worker (heartbeat@1)"),
    ({"adapter": "fake", "definition": "dispatch@1"},
     "the demo's stand-in for the agent dispatch@1 (FACTORY_FAKE_AGENTS): it plays a scripted outcome and changes "
     "nothing outside the runtime"),
])
def test_builtin_and_fake_adapters_say_what_they_are(plan, words):
    assert what_runs(plan) == words


def test_a_stand_in_says_what_production_would_do_and_never_contradicts_mutates():
    plan = {"definition": "merge-apply@1", "adapter": "fake", "mutating": True, "input": {"repo": "alpha"}}
    assert what_it_does(plan, "Merges the pull request at the reviewed head.") == (
        "In production: Merges the pull request at the reviewed head. Here the demo's stand-in plays a scripted "
        "outcome and changes nothing outside the runtime.")
    assert dict(describe_plan(plan))["mutates"] == (
        "yes, in production: the real agent changes things outside the runtime; the demo's stand-in does not, "
        "but its run is handled as mutating (an interrupted attempt waits for a person)")
    command = {"definition": "reaper@1", "adapter": "command", "argv": ["reaper.py"], "mutating": True, "input": {}}
    assert what_it_does(command, "Moves stale claims.") == "Moves stale claims."


@pytest.mark.parametrize("seconds, text", [
    (None, "—"), (-3, "0 s"), (0, "0 s"), (45.9, "45 s"), (65, "1 m 05 s"), (3600 * 2 + 7 * 60 + 5, "2 h 07 m"),
    (86400 * 3 + 3600 * 4 + 1, "3 d 4 h"),
])
def test_durations_read_in_the_largest_two_units(seconds, text):
    assert duration(seconds) == text


def test_instants_are_to_the_second_in_utc_whatever_their_zone():
    paris = datetime(2026, 11, 30, 22, 0, 1, 999999, tzinfo=timezone(timedelta(hours=1)))
    assert (instant(paris), instant(None)) == (
        '<time datetime="2026-11-30T21:00:01Z" title="2026-11-30 21:00:01 UTC">2026-11-30 21:00:01 UTC</time>', "—")
    start = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
    assert (between(start, start + timedelta(seconds=65)), between(start, None)) == ("1 m 05 s", "—")


def test_an_instant_reads_in_the_readers_zone_when_one_is_active():
    """Lord Howe Island: +11 in December, +10:30 in June (half an hour of daylight saving)."""
    with django_timezone.override(ZoneInfo("Australia/Lord_Howe")):
        summer = instant(datetime(2026, 11, 30, 21, 0, 1, tzinfo=UTC))
        winter = instant(datetime(2026, 6, 30, 21, 0, 1, tzinfo=UTC))
    assert summer == '<time datetime="2026-11-30T21:00:01Z" title="2026-11-30 21:00:01 UTC">2026-12-01 08:00:01 +11</time>'
    assert winter == '<time datetime="2026-06-30T21:00:01Z" title="2026-06-30 21:00:01 UTC">2026-07-01 07:30:01 +1030</time>'


@pytest.mark.parametrize("seconds, text", [
    (0, "0.0 s"), (-1, "0.0 s"), (0.000001, "< 0.1 s"), (0.0499, "< 0.1 s"), (0.05, "0.1 s"), (0.44, "0.4 s"), (45.96, "46.0 s"), (59.96, "1 m 00 s"), (65, "1 m 05 s"),
])
def test_how_long_a_run_took_reads_to_the_tenth_of_a_second_under_a_minute(seconds, text):
    start = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
    assert between(start, start + timedelta(seconds=seconds)) == text
