"""Pausing and resuming a loop (schedules.pausing; docs/schedules.md, "Pausing a loop")."""

from io import StringIO

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.core.management import call_command

from ops.doctor import collect_status
from runtime.models import Door, Event, JournalEntry, Proposal, Run
from runtime.registry import store
from runtime.services.admission import admit_event
from runtime.services.planning import plan_pending
from schedules.history import Gap, unwatched
from schedules.models import LoopChange, LoopPause, ScheduleState, ScheduleSync
from schedules.overview import schedules_overview
from schedules.pausing import PauseRefused, pause_loop, resume_loop
from schedules.state import SYNC_NAME, loops_fingerprint
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, finish_active_runs, tick

pytestmark = pytest.mark.django_db

HOURLY_HEARTBEAT = "schedules:\n  heartbeat:\n    every: 60m\n"
NO_HEARTBEAT = "schedules:\n  heartbeat:\n    enabled: false\n"


@pytest.fixture
def controller(django_user_model):
    user = django_user_model.objects.create_user("carol", password="carol-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="control_loop"))
    return user


def ticks(loop="heartbeat"):
    return list(Event.objects.filter(loop=loop).order_by("id").values_list("uid", flat=True))


def pause(user, instant, *, loop="heartbeat", note="flooding the inbox", until=None):
    return pause_loop(loop, registry=store.current(), user=user, note=note, until=until and at(until), now=at(instant), via="cli")


def resume(user, instant, *, loop="heartbeat", note=""):
    return resume_loop(loop, registry=store.current(), user=user, note=note, now=at(instant), via="cli")


def journal(action):
    return [(e.actor, e.actor_name, e.data) for e in JournalEntry.objects.filter(action=action).order_by("id")]


def test_a_paused_loop_fires_no_slot_and_its_state_does_not_advance(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    pause(controller, "2026-11-30T21:05:00Z")
    before = ScheduleState.objects.values("last_slot", "last_event_id").get(loop="heartbeat")
    for instant in ("2026-11-30T22:00:05Z", "2026-11-30T23:00:05Z"):
        assert tick(instant).ticks == []
    assert ticks() == ["clock:heartbeat:2026-11-30T21:00:00Z"]
    assert ScheduleState.objects.values("last_slot", "last_event_id").get(loop="heartbeat") == before
    assert ScheduleState.objects.get(loop="heartbeat").next_due is None
    assert journal("loop_paused") == [
        ("operator", "carol", {"loop": "heartbeat", "note": "flooding the inbox", "via": "cli"}),
    ]


def test_resume_fires_the_current_slot_with_no_skips_and_journals_the_covered_slots(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    finish_active_runs()
    pause(controller, "2026-11-30T21:05:00Z")
    tick("2026-11-30T23:00:05Z")
    assert resume(controller, "2026-12-01T03:30:00Z", note="fixed the agent") == 6
    report = tick("2026-12-01T03:30:01Z")
    assert [(t.event_id, t.skipped_slots) for t in report.ticks] == [("clock:heartbeat:2026-12-01T03:00:00Z", 0)]
    assert Event.objects.get(uid="clock:heartbeat:2026-12-01T03:00:00Z").payload["skippedSlots"] == 0
    assert journal("loop_resumed") == [("operator", "carol", {
        "loop": "heartbeat", "note": "fixed the agent", "via": "cli", "coveredSlots": 6,
    })]
    assert LoopPause.objects.count() == 0


def test_until_resumes_the_loop_by_itself_and_it_fires(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    finish_active_runs()
    pause(controller, "2026-11-30T21:05:00Z", until="2026-11-30T23:30:00Z")
    assert ScheduleState.objects.get(loop="heartbeat").next_due == at("2026-11-30T23:30:00Z")
    assert tick("2026-11-30T23:29:59Z").ticks == []
    report = tick("2026-11-30T23:30:00Z")
    assert [(t.event_id, t.skipped_slots) for t in report.ticks] == [("clock:heartbeat:2026-11-30T23:00:00Z", 0)]
    assert journal("loop_paused")[0][2]["until"] == "2026-11-30T23:30:00Z"
    assert journal("loop_resumed") == [("system", "", {"loop": "heartbeat", "via": "until", "auto": True, "coveredSlots": 2})]


def test_a_pause_is_a_gap_in_the_earning_history(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    pause(controller, "2026-11-30T21:05:00Z")
    resume(controller, "2026-11-30T22:10:00Z")
    tick("2026-11-30T22:10:01Z")
    assert list(LoopChange.objects.filter(loop="heartbeat").values_list("kind", flat=True)) == ["enabled", "paused", "resumed"]
    gaps = unwatched(["heartbeat"], since=at("2026-11-30T21:00:05Z"), now=at("2026-11-30T23:00:00Z"))
    assert gaps == {"heartbeat": [Gap(at("2026-11-30T21:05:00Z"), at("2026-11-30T22:10:00Z"), "paused")]}


def test_the_refusals(registry_files, controller, viewer):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    cases = [
        (lambda: pause(viewer, "2026-11-30T21:05:00Z"), "permission_denied", 403),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", loop="nope"), "unknown_loop", 404),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", loop="reaper"), "loop_disabled", 409),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", note="  "), "note_required", 400),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", note="x" * 2001), "note_too_long", 400),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", note="a\x00b"), "invalid_note", 400),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", note="\x1b]0;pwned\x07"), "invalid_note", 400),
        (lambda: resume(controller, "2026-11-30T21:05:00Z", note="\x1b[2J"), "invalid_note", 400),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", until="2026-11-30T21:05:00Z"), "until_in_past", 400),
        (lambda: pause(controller, "2026-11-30T21:05:00Z", until="2026-12-30T21:05:01Z"), "until_too_far", 400),
        (lambda: resume(controller, "2026-11-30T21:05:00Z"), "not_paused", 409),
    ]
    for call, code, status in cases:
        with pytest.raises(PauseRefused) as refused:
            call()
        assert (refused.value.code, refused.value.status) == (code, status)
    pause(controller, "2026-11-30T21:05:00Z")
    with pytest.raises(PauseRefused) as refused:
        pause(controller, "2026-11-30T21:06:00Z")
    assert refused.value.code == "already_paused"
    assert JournalEntry.objects.filter(action="loop_paused").count() == 1


@pytest.mark.parametrize(("door", "source"), [(Door.INJECT, "operator"), (Door.EVENTS, "bridge")])
def test_an_event_of_the_loop_type_from_another_door_is_still_planned_as_watched(registry_files, controller, door, source):
    """The bridge's host-clock job and ``inject`` alike (docs/schedules.md, "Pausing a loop")."""
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    pause(controller, "2026-11-30T21:05:00Z")
    payload = {"loop": "heartbeat", "slot": "2026-11-30T21:00:00Z", "cadenceSeconds": 3600, "skippedSlots": 0}
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": "by-hand-1", "type": "clock.tick.heartbeat", "source": source,
        "subject": "heartbeat", "occurredAt": "2026-11-30T21:06:00Z", "correlationId": "by-hand-1", "payload": payload,
    }, door=door, now=at("2026-11-30T21:06:00Z"))
    plan_pending(now=at("2026-11-30T21:06:01Z"))
    assert list(Proposal.objects.values_list("status", "event__door")) == [("pending", door.value)]
    assert Run.objects.count() == 0


def test_a_paused_keyed_loop_fires_no_key_until_resumed(registry_files, controller):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    pause(controller, "2026-11-30T07:00:00Z", loop="customer-digest")
    assert tick("2026-11-30T08:00:01Z").ticks == []
    assert ticks("customer-digest") == []
    resume(controller, "2026-12-01T08:30:00Z", loop="customer-digest")
    tick("2026-12-01T08:30:01Z")
    assert ticks("customer-digest") == ["clock:customer-digest:alice:2026-12-01T08:00:00Z"]


def test_a_pause_survives_disable_and_enable_and_is_dropped_with_the_loop(registry_files, controller):
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.write_text(HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    pause(controller, "2026-11-30T21:05:00Z")
    overlay.write_text(NO_HEARTBEAT)
    tick("2026-11-30T22:00:05Z")
    overlay.write_text(HOURLY_HEARTBEAT)
    assert tick("2026-11-30T23:00:05Z").ticks == []
    assert LoopPause.objects.filter(loop="heartbeat").exists()
    assert list(LoopChange.objects.filter(loop="heartbeat").values_list("kind", flat=True)) == ["enabled", "paused"]
    # A loop that leaves the registry takes its pause with it.
    LoopPause.objects.filter(loop="heartbeat").update(loop="old-loop")
    ScheduleSync.objects.all().delete()  # as a registry change would: the next iteration syncs
    tick("2026-11-30T23:31:05Z")
    assert not LoopPause.objects.exists()
    assert journal("loop_pause_dropped") == [("system", "", {"loop": "old-loop"})]


@pytest.mark.usefixtures("host_clock_as_database_clock")
def test_the_commands_pause_and_resume_with_the_os_user_and_refuse_with_exit_2(registry_files, controller, viewer):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    out = StringIO()
    with time_machine.travel(at("2026-11-30T21:05:00Z"), tick=False):
        call_command("schedule", "pause", "heartbeat", "--note", "agent failing", "--until", "2026-12-24T00:00:00Z",
                     "--as", "carol", stdout=out)
    assert "paused heartbeat until 2026-12-24T00:00:00Z" in out.getvalue()
    assert "still admitted and planned as any other door's event: watched" in out.getvalue()
    (entry,) = journal("loop_paused")
    assert (entry[0], entry[1], entry[2]["via"], entry[2]["until"]) == ("operator", "carol", "cli", "2026-12-24T00:00:00Z")
    assert entry[2]["osUser"]
    err = StringIO()
    with pytest.raises(SystemExit) as exited, time_machine.travel(at("2026-11-30T22:00:00Z"), tick=False):
        call_command("schedule", "resume", "heartbeat", "--as", "victor", stderr=err)
    assert exited.value.code == 2
    assert err.getvalue().strip() == "refused: permission_denied: victor lacks the control_loop permission"
    out = StringIO()
    with time_machine.travel(at("2026-11-30T23:30:00Z"), tick=False):
        call_command("schedule", "resume", "heartbeat", "--as", "carol", "--json", stdout=out)
    assert out.getvalue() == '{"loop":"heartbeat","paused":false,"coveredSlots":2}\n'


@pytest.mark.usefixtures("host_clock_as_database_clock")
def test_the_resume_command_says_a_keyed_loops_rows_fire_as_its_catch_up_policy_says(registry_files, controller):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    out = StringIO()
    with time_machine.travel(at("2026-11-30T21:05:00Z"), tick=False):
        call_command("schedule", "pause", "customer-digest", "--note", "migration", "--as", "carol")
    with time_machine.travel(at("2026-11-30T23:30:00Z"), tick=False):
        call_command("schedule", "resume", "customer-digest", "--as", "carol", stdout=out)
    assert out.getvalue() == ("resumed customer-digest: each of its keys' rows that came due fires at the next "
                              "iteration as its catch-up policy (none) says\n")


def test_a_paused_loop_is_shown_paused_and_never_stopped(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    pause(controller, "2026-11-30T21:05:00Z", note="agent failing", until="2026-12-01T09:30:00Z")
    tick("2026-11-30T21:05:01Z")
    (view,) = schedules_overview(store.current(), now=at("2026-12-01T09:00:00Z"), names=["heartbeat"])
    item = view.as_json()
    assert (item["stopped"], item["nextSlotDue"], item["paused"]) == (False, "2026-12-01T09:00:00Z", {
        "by": "carol", "at": "2026-11-30T21:05:00Z", "note": "agent failing", "until": "2026-12-01T09:30:00Z",
    })
    out = StringIO()
    call_command("schedule", "show", "heartbeat", stdout=out)
    assert "paused             by carol at 2026-11-30T21:05:00Z, until 2026-12-01T09:30:00Z: agent failing" in out.getvalue()


def test_a_pause_without_until_older_than_the_warning_is_the_long_pauses_anomaly(registry_files, controller, settings):
    settings.FACTORY_PAUSE_WARN_SECONDS = 86400
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    pause(controller, "2026-11-30T21:05:00Z")
    at_boundary = collect_status(now=at("2026-12-01T21:05:00Z"))
    assert (at_boundary["longPauses"], "longPauses" in at_boundary["anomalies"]) == ([], False)
    assert at_boundary["stoppedSchedules"] == []
    after = collect_status(now=at("2026-12-01T21:05:01Z"))
    assert after["longPauses"] == [{"loop": "heartbeat", "pausedAt": "2026-11-30T21:05:00Z", "by": "carol"}]
    assert "longPauses" in after["anomalies"] and "stoppedSchedules" not in after["anomalies"]


def test_a_pause_with_until_is_never_a_long_pause(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    pause(controller, "2026-11-30T21:05:00Z", until="2026-12-10T00:00:00Z")
    assert collect_status(now=at("2026-12-05T00:00:00Z"))["longPauses"] == []


def test_a_keyed_loop_paused_until_an_instant_resumes_by_itself(registry_files, controller):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    pause(controller, "2026-11-30T07:00:00Z", loop="customer-digest", until="2026-12-01T07:00:00Z")
    assert tick("2026-11-30T08:00:01Z").ticks == []
    tick("2026-12-01T07:00:00Z")  # resumed, it fires the row's current slot (yesterday's 09:00 Budapest)
    assert journal("loop_resumed")[0][:2] == ("system", "")
    tick("2026-12-01T08:00:01Z")
    assert ticks("customer-digest") == [
        "clock:customer-digest:alice:2026-11-30T08:00:00Z", "clock:customer-digest:alice:2026-12-01T08:00:00Z",
    ]


def test_a_resume_fires_even_when_a_sync_that_saw_the_pause_recorded_the_fingerprint(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:05Z")
    finish_active_runs()
    pause(controller, "2026-11-30T21:05:00Z")
    tick("2026-11-30T21:05:01Z")
    resume(controller, "2026-11-30T22:30:00Z")
    # Another process's sync, which read the pause before the resume committed, stores the
    # fingerprint again after the resume deleted it: no sync follows.
    ScheduleSync.objects.create(name=SYNC_NAME, fingerprint=loops_fingerprint(store.current()), synced_at=at("2026-11-30T22:30:00Z"))
    report = tick("2026-11-30T22:30:01Z")
    assert [(t.event_id, t.skipped_slots) for t in report.ticks] == [("clock:heartbeat:2026-11-30T22:00:00Z", 0)]


def test_an_until_exactly_thirty_days_ahead_is_taken(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    assert pause(controller, "2026-11-30T21:05:00Z", until="2026-12-30T21:05:00Z").until == at("2026-12-30T21:05:00Z")


def test_what_the_loop_is_is_refused_before_what_the_request_says(registry_files, controller):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    with pytest.raises(PauseRefused) as refused:
        pause(controller, "2026-11-30T21:05:00Z", loop="reaper", note="")
    assert refused.value.code == "loop_disabled"
    pause(controller, "2026-11-30T21:05:00Z")
    with pytest.raises(PauseRefused) as refused:
        pause(controller, "2026-11-30T21:06:00Z", note="x" * 2001)
    assert (refused.value.code, refused.value.detail) == ("already_paused", "heartbeat is already paused")


def test_schedule_lists_enabled_column_says_the_registry_and_the_pause_apart():
    from ops.schedule_text import list_text

    item = {"name": "heartbeat", "status": "paused", "every": "60m", "at": None, "timezone": None, "days": None,
            "keyed": False, "approval": "auto", "enabled": True, "source": "overlay", "overrides": [],
            "lastSlotFired": None, "nextSlotDue": None, "lastOutcome": None, "lastRun": None, "pendingProposals": 0,
            "paused": {"by": "carol"}, "stopped": False}
    header, row = list_text([item]).splitlines()
    column = header.index("ENABLED")
    assert row[column:column + len("yes, paused")] == "yes, paused"
    header, row = list_text([{**item, "enabled": False}]).splitlines()
    assert row[header.index("ENABLED"):].startswith("no, paused  ")
