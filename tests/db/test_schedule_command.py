"""``manage.py schedule``: list, show, next, tick (docs/design.md §5, §10)."""

import json
import re
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.models import Event, JournalEntry
from schedules.models import ScheduleState, SlotLoopStatus
from tests.conftest import at
from tests.helpers import inject, many_loops, tick

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

NOW = "2026-11-30T21:08:00Z"


def run(*args) -> str:
    out = StringIO()
    with time_machine.travel(at(NOW), tick=False):
        call_command("schedule", *args, stdout=out)
    return out.getvalue()


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_bare_schedule_prints_the_table(registry_files):
    tick("2026-11-30T21:07:00Z")
    lines = run().splitlines()
    assert [cells(line) for line in lines] == [
        ["LOOP", "STATUS", "EVERY", "APPROVAL", "ENABLED", "SOURCE", "LAST SLOT FIRED", "NEXT SLOT DUE", "LAST OUTCOME",
         "PENDING"],
        ["heartbeat", "ok", "5m", "auto", "yes", "kernel", "2026-11-30T21:05:00Z", "2026-11-30T21:10:00Z",
         "planning APPROVED", "0"],
        ["customer-digest", "disabled", "keyed", "watched", "no", "kernel", "never", "-", "-", "0"],
        ["reaper", "disabled", "60m", "watched", "no", "kernel", "never", "-", "-", "0"],
    ]
    assert run("list") == run()


def test_the_table_puts_problems_first_in_the_dashboards_words_and_json_keeps_names(registry_files, settings):
    settings.FACTORY_PILEUP_THRESHOLD = 0
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n")
    tick("2026-11-30T21:07:00Z")
    assert [cells(line)[:2] for line in run().splitlines()] == [
        ["LOOP", "STATUS"], ["reaper", "piling up"], ["heartbeat", "ok"], ["customer-digest", "disabled"],
    ]
    assert [item["name"] for item in json.loads(run("list", "--json"))] == ["customer-digest", "heartbeat", "reaper"]


def test_bare_schedule_takes_json(registry_files):
    assert json.loads(run("--json")) == json.loads(run("list", "--json"))


def test_show_adds_the_last_ticks(registry_files):
    tick("2026-11-30T21:07:00Z")
    document = json.loads(run("show", "heartbeat", "--json"))
    assert document["name"] == "heartbeat"
    assert [t["eventId"] for t in document["ticks"]] == ["clock:heartbeat:2026-11-30T21:05:00Z"]
    text = run("show", "heartbeat")
    assert "last slot fired    2026-11-30T21:05:00Z" in text
    ticks = text.split("last ticks:")[1].splitlines()
    assert ticks[1].split()[:4] == ["SLOT", "ADMITTED", "AT", "SKIPPED"]
    assert ticks[2].split()[:5] == ["2026-11-30T21:05:00Z", "2026-11-30T21:07:00Z", "0", "planning", "APPROVED"]


def test_next_lists_k_slots(registry_files):
    tick("2026-11-30T21:07:00Z")
    assert json.loads(run("next", "heartbeat", "-n", "2", "--json")) == {
        "loop": "heartbeat", "enabled": True, "slots": ["2026-11-30T21:10:00Z", "2026-11-30T21:15:00Z"],
    }
    assert run("next", "heartbeat").splitlines()[1:] == [
        "2026-11-30T21:10:00Z", "2026-11-30T21:15:00Z", "2026-11-30T21:20:00Z",
        "2026-11-30T21:25:00Z", "2026-11-30T21:30:00Z",
    ]


def test_an_unknown_loop_is_refused(registry_files):
    with pytest.raises(CommandError, match="no loop named 'nope'") as caught:
        run("show", "nope")
    assert caught.value.returncode == 2


def test_tick_at_a_past_instant_runs_one_iteration_without_recording_the_slot_loop(registry_files):
    tick("2026-11-30T20:40:00Z")
    document = json.loads(run("tick", "--at", "2026-11-30T20:59:00Z", "--json"))
    assert document == {
        "at": "2026-11-30T20:59:00Z", "dryRun": False, "planned": 1, "leftToTheSlotLoop": [],
        "ticks": [{"loop": "heartbeat", "eventId": "clock:heartbeat:2026-11-30T20:55:00Z",
                   "slot": "2026-11-30T20:55:00Z", "skippedSlots": 2, "admitted": True}],
    }
    assert Event.objects.filter(uid="clock:heartbeat:2026-11-30T20:55:00Z").exists()
    assert not SlotLoopStatus.objects.exists()


def test_tick_at_a_past_instant_never_fires_a_loops_first_slot(registry_files):
    document = json.loads(run("tick", "--at", "2026-11-30T20:00:00Z", "--json"))
    assert document == {
        "at": "2026-11-30T20:00:00Z", "dryRun": False, "planned": 0, "leftToTheSlotLoop": ["heartbeat"], "ticks": [],
    }
    assert not Event.objects.exists()
    assert ScheduleState.objects.get(loop="heartbeat").last_slot is None
    assert "left to the slot loop (never fired, re-enabled or keyed: their first slot is the current one): heartbeat" in (
        run("tick", "--at", "2026-11-30T20:00:00Z")
    )
    dry = json.loads(run("tick", "--at", "2026-11-30T20:00:00Z", "--dry-run", "--json"))
    assert (dry["ticks"], dry["leftToTheSlotLoop"]) == ([], ["heartbeat"])


def test_tick_at_a_past_instant_stamps_admission_and_planning_with_the_real_instant(registry_files):
    tick("2026-11-30T20:40:00Z")
    inject("op-1", "factory.work.requested", {"repo": "alpha"}, "2026-11-30T21:00:00Z")
    run("tick", "--at", "2026-11-30T20:59:00Z")
    fired = Event.objects.get(uid="clock:heartbeat:2026-11-30T20:55:00Z")
    assert (fired.admitted_at, fired.planned_at) == (at(NOW), at(NOW))
    assert Event.objects.get(uid="op-1").planned_at == at(NOW)
    assert ScheduleState.objects.get(loop="heartbeat").last_tick_at == at(NOW)
    journal = JournalEntry.objects.filter(event__uid__in=["op-1", fired.uid]).order_by("id")
    assert [(e.event.uid, e.action, e.at) for e in journal] == [
        ("op-1", "event_admitted", at("2026-11-30T21:00:00Z")),
        (fired.uid, "event_admitted", at(NOW)),
        ("op-1", "proposal_auto_approved", at(NOW)),
        ("op-1", "run_queued", at(NOW)),
        (fired.uid, "event_noop", at(NOW)),  # the 20:40 tick's run is still queued
    ]


def test_tick_at_a_future_instant_is_refused(registry_files):
    with pytest.raises(CommandError, match="in the future") as caught:
        run("tick", "--at", "2026-11-30T22:00:00Z")
    assert caught.value.returncode == 2
    assert not Event.objects.exists()
    assert not ScheduleState.objects.exists()


def test_tick_dry_run_writes_nothing_and_says_what_would_fire(registry_files):
    tick("2026-11-30T21:07:00Z")
    before = (Event.objects.count(), list(ScheduleState.objects.values()))
    document = json.loads(run("tick", "--at", "2026-12-01T03:31:00Z", "--dry-run", "--json"))
    assert document["ticks"] == [{
        "loop": "heartbeat", "eventId": "clock:heartbeat:2026-12-01T03:30:00Z",
        "slot": "2026-12-01T03:30:00Z", "skippedSlots": 76, "alreadyAdmitted": False,
    }]
    assert (document["dryRun"], document["planned"]) == (True, None)
    assert (Event.objects.count(), list(ScheduleState.objects.values())) == before
    assert "would fire" in run("tick", "--at", "2026-12-01T03:31:00Z", "--dry-run")


def test_tick_refuses_an_instant_without_an_offset(registry_files):
    with pytest.raises(CommandError, match="offset") as caught:
        run("tick", "--at", "2026-11-30T20:00:00")
    assert caught.value.returncode == 2


@pytest.mark.parametrize("text", ["", "yesterday", "20261130T200000Z"])
def test_tick_refuses_what_is_not_an_instant_and_fires_nothing(registry_files, text):
    with pytest.raises(CommandError, match="not an RFC 3339 date-time") as caught:
        run("tick", "--at", text)
    assert caught.value.returncode == 2
    assert Event.objects.count() == 0


@pytest.mark.parametrize("count", [1, 500])
def test_list_json_costs_constant_queries(registry_files, django_assert_num_queries, count):
    many_loops(registry_files, count)
    with django_assert_num_queries(5):
        items = json.loads(run("list", "--json"))
    assert len(items) == count


def test_a_bad_overlay_is_reported_with_its_errors_not_a_system_check(registry_files, capsys):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabeld: true\n")
    with pytest.raises(CommandError, match="the registry on disk does not validate .1 error.s.."):
        run("list")
    assert "schema: at schedules/reaper: Additional properties are not allowed" in capsys.readouterr().err


@pytest.mark.parametrize("args", [
    ("--at", "0001-01-01T00:00:00Z"), ("--at", "0001-01-01T00:00:00Z", "--dry-run"), ("--at", "9999-12-31T23:59:59Z", "--dry-run"),
])
def test_tick_at_the_ends_of_the_calendar_is_refused(registry_files, args):
    registry_files.write_config("schedule.yaml", "schedules:\n  nightly:\n    at: \"02:30\"\n    timezone: Europe/Budapest\n"
                                "    eventType: clock.tick.heartbeat\n    catchUp: none\n    singleton: true\n    enabled: true\n")
    with pytest.raises(CommandError) as caught:
        run("tick", *args)
    assert caught.value.returncode == 2
    assert Event.objects.count() == 0


@pytest.mark.parametrize(("argv", "error"), [
    (["next", "heartbeat", "-n", "abc"], "argument -n: a whole number from 1 to 1000, not 'abc'"),
    (["next", "heartbeat", "-n", "\u0661\u0662"], "argument -n: a whole number from 1 to 1000, not '\u0661\u0662'"),
    (["next", "heartbeat", "-n", "1_0"], "argument -n: a whole number from 1 to 1000, not '1_0'"),
    (["next", "heartbeat", "-n=0"], "argument -n: a whole number from 1 to 1000, not '0'"),
    (["next", "heartbeat", "-n", "1001"], "argument -n: a whole number from 1 to 1000, not '1001'"),
    (["list", "--page", "two"], "argument --page: a whole number from 1 to 1000000000, not 'two'"),
    (["list", "--page-size", "501"], "argument --page-size: a whole number from 1 to 500, not '501'"),
])
def test_a_number_it_cannot_take_is_a_usage_error_naming_the_option_and_the_value(registry_files, argv, error):
    with pytest.raises(CommandError) as caught:
        run(*argv)
    assert str(caught.value) == f"Error: {error}"


def test_tick_names_the_option_of_an_instant_it_cannot_read(registry_files):
    with pytest.raises(CommandError) as caught:
        run("tick", "--at", "yesterday")
    assert (str(caught.value), caught.value.returncode) == (
        "--at 'yesterday' is not an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac]Z or ±HH:MM)", 2)
