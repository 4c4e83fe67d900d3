"""The doctor: ``GET /status`` and ``manage.py doctor`` (docs/design.md §11; docs/schedules.md)."""

import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from factory_site import __version__
from ops.doctor import collect_status
from ops.slot_loop import iterate
from runtime.registry import get_registry, store
from schedules.models import ScheduleState
from tests.conftest import at

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

#: Only the hourly reaper ticks, so each test watches one loop.
REAPER_ONLY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


def turn(instant: str):
    """One slot-loop iteration at a named instant, recorded as the running slot loop's."""
    return iterate(now=at(instant))


def doctor(instant: str) -> tuple[int, dict]:
    out = StringIO()
    with time_machine.travel(at(instant), tick=False):
        try:
            call_command("doctor", stdout=out)
            code = 0
        except SystemExit as exc:
            code = exc.code
    return code, json.loads(out.getvalue())


def test_a_healthy_runtime_is_ok_and_doctor_exits_0(registry_files):
    turn("2026-11-30T21:07:00Z")
    code, document = doctor("2026-11-30T21:07:04Z")
    assert code == 0
    assert document == {
        "version": __version__,
        "ok": True,
        "anomalies": [],
        "registryDigest": get_registry().digest,
        "loop": {"lastIterationAt": "2026-11-30T21:07:00Z", "ageSeconds": 4.0, "turning": True},
        "stoppedSchedules": [],
        "proposalPileUps": [],
        "registryInvalid": [],
        "runs": {"queued": 1, "running": 0},
        "expiredLeases": [],
        "interruptedRuns": [],
        "starvedQueue": [],
        "stuckLoops": [],
        "futureLastSlot": [],
        "clockSkew": [],
        "longPauses": [],
        "runBacklog": [],
        "processes": [],
    }


def test_a_slot_loop_that_never_ran_is_an_anomaly(registry_files):
    code, document = doctor("2026-11-30T21:07:00Z")
    assert code == 1
    assert document["anomalies"] == ["slotLoopStale"]
    assert document["loop"] == {"lastIterationAt": None, "ageSeconds": None, "turning": False}


def test_a_slot_loop_older_than_ten_seconds_is_an_anomaly(registry_files):
    turn("2026-11-30T21:07:00Z")
    assert doctor("2026-11-30T21:07:10Z")[0] == 0
    code, document = doctor("2026-11-30T21:07:10.500000Z")
    assert code == 1
    assert document["anomalies"] == ["slotLoopStale"]
    assert document["loop"]["ageSeconds"] == 10.5


def test_a_stopped_loop_appears_after_two_intervals_and_clears_after_a_tick(registry_files):
    registry_files.write_config("schedule.yaml", REAPER_ONLY)
    turn("2026-11-30T21:07:00Z")
    # The slot loop keeps turning, but the reaper's ticks stop coming (as if admission failed).
    assert collect_status(now=at("2026-11-30T23:07:00Z"))["stoppedSchedules"] == []
    status = collect_status(now=at("2026-11-30T23:07:01Z"))
    assert status["stoppedSchedules"] == [
        {"loop": "reaper", "lastTickAt": "2026-11-30T21:07:00Z", "expectedBy": "2026-11-30T23:07:00Z"},
    ]
    assert "stoppedSchedules" in status["anomalies"]
    turn("2026-11-30T23:08:00Z")
    status = collect_status(now=at("2026-11-30T23:08:02Z"))
    assert status["stoppedSchedules"] == []
    assert status["ok"] is True


def test_a_loop_that_never_ticked_counts_from_when_it_was_enabled(registry_files):
    registry_files.write_config("schedule.yaml", REAPER_ONLY)
    ScheduleState.objects.create(loop="reaper", enabled=True, enabled_since=at("2026-11-30T21:00:00Z"))
    assert collect_status(now=at("2026-11-30T23:00:00Z"))["stoppedSchedules"] == []
    assert collect_status(now=at("2026-11-30T23:00:01Z"))["stoppedSchedules"] == [
        {"loop": "reaper", "lastTickAt": None, "expectedBy": "2026-11-30T23:00:00Z"},
    ]


def test_the_slot_loop_records_when_it_first_saw_a_loop_enabled(registry_files):
    turn("2026-11-30T21:07:00Z")
    state = ScheduleState.objects.get(loop="heartbeat")
    assert (state.enabled, state.enabled_since) == (True, at("2026-11-30T21:07:00Z"))


def test_a_disabled_loop_is_never_stopped(registry_files):
    registry_files.write_config("schedule.yaml", REAPER_ONLY)
    turn("2026-11-30T21:07:00Z")
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n")
    turn("2026-11-30T21:08:00Z")
    assert collect_status(now=at("2026-12-02T00:00:00Z"))["stoppedSchedules"] == []


@pytest.mark.parametrize(("threshold", "piled_up"), [(3, True), (4, False)])
def test_pile_up_threshold(registry_files, settings, threshold, piled_up):
    settings.FACTORY_PILEUP_THRESHOLD = threshold
    registry_files.write_config("schedule.yaml", REAPER_ONLY)
    for hour in (20, 21, 22, 23):
        turn(f"2026-11-30T{hour}:00:05Z")
    status = collect_status(now=at("2026-11-30T23:00:06Z"))
    assert status["proposalPileUps"] == ([{"loop": "reaper", "pending": 4}] if piled_up else [])
    assert ("proposalPileUps" in status["anomalies"]) is piled_up


def test_an_auto_loop_never_piles_up(registry_files, settings):
    settings.FACTORY_PILEUP_THRESHOLD = 0
    turn("2026-11-30T21:07:00Z")
    assert collect_status(now=at("2026-11-30T21:07:01Z"))["proposalPileUps"] == []


def test_a_bad_edit_on_disk_is_registry_invalid_while_the_last_good_registry_answers(registry_files):
    turn("2026-11-30T21:07:00Z")
    good = get_registry().digest
    # Written behind the store's back, as an operator's editor would: the store notices the change.
    (registry_files.config_dir / "schedule.yaml").write_text("schedules:\n  reaper:\n    enabeld: true\n")
    code, document = doctor("2026-11-30T21:07:02Z")
    assert code == 1
    assert document["anomalies"] == ["registryInvalid"]
    assert document["registryDigest"] == good
    assert [(e["entry"], e["rule"]) for e in document["registryInvalid"]] == [("<top>", "schema")]
    assert "enabeld" in document["registryInvalid"][0]["detail"]
    # Fixed on disk: the anomaly clears.
    (registry_files.config_dir / "schedule.yaml").write_text("schedules: {}\n")
    assert doctor("2026-11-30T21:07:03Z") == (0, {**document, "ok": True, "anomalies": [], "registryInvalid": [],
                                                  "loop": {**document["loop"], "ageSeconds": 3.0}})


def test_doctor_runs_and_says_why_when_no_registry_ever_loaded(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    approval: auto\n")
    store.reset()
    code, document = doctor("2026-11-30T21:07:00Z")
    assert code == 1
    assert document["registryDigest"] is None
    assert set(document["anomalies"]) == {"slotLoopStale", "registryInvalid"}
    assert document["registryInvalid"][0]["rule"] == "overlay_forbidden_override"


class Terminal(StringIO):
    """Standard output as a person's terminal."""

    def isatty(self):
        return True


def doctor_output(instant: str, *args, out=None) -> tuple[int, str]:
    out = out if out is not None else StringIO()
    with time_machine.travel(at(instant), tick=False):
        try:
            call_command("doctor", *args, stdout=out)
            code = 0
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue()


def test_on_a_terminal_the_doctor_says_each_anomaly_in_a_line_with_the_same_exit_status(registry_files):
    registry_files.write_config("schedule.yaml", REAPER_ONLY)
    turn("2026-11-30T21:07:00Z")
    code, text = doctor_output("2026-11-30T23:07:01Z", out=Terminal())
    assert code == 1
    assert text.splitlines() == [
        "2 anomalies",
        "slot loop not turning: last iteration 2026-11-30T21:07:00Z, 2 h 00 m ago",
        "stopped: reaper (last tick 2026-11-30T21:07:00Z, 2 h 00 m ago; expected by 2026-11-30T23:07:00Z)",
    ]


def test_a_healthy_doctor_says_ok_in_words_and_json_stays_for_pipes_and_json(registry_files):
    turn("2026-11-30T21:07:00Z")
    assert doctor_output("2026-11-30T21:07:04Z", "--text") == (0, "ok\n")
    code, piped = doctor_output("2026-11-30T21:07:04Z")
    assert (code, json.loads(piped)["ok"]) == (0, True)
    code, forced = doctor_output("2026-11-30T21:07:04Z", "--json", out=Terminal())
    assert forced == piped


def test_a_run_backlog_in_words(registry_files, settings):
    settings.FACTORY_BACKLOG_WARN_SECONDS = 60
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: false\n")
    turn("2026-11-30T21:07:00Z")
    turn("2026-11-30T21:08:30Z")
    code, text = doctor_output("2026-11-30T21:08:31Z", "--text")
    assert (code, text.splitlines()) == (1, [
        "1 anomaly", "run backlog: 1 run(s) queued, the oldest for 91.0 s (warns past 1000 runs or 60 s)",
    ])


def test_the_processes_say_which_slot_loop_emits_ticks():
    from ops.doctor_checks import find_processes
    from ops.models import ProcessRecord
    from schedules.models import TickEmitterLease

    now = at("2026-12-06T21:00:00Z")
    for role, pid in (("slot-loop", 11), ("slot-loop", 22), ("worker", 33)):
        ProcessRecord.objects.create(role=role, host="factory-1", pid=pid, started_at=now, last_seen_at=now,
                                     clock_offset_seconds=0.0)
    TickEmitterLease.objects.create(name="ticks", holder="factory-1:22:0a1b2c3d", acquired_at=now,
                                    expires_at=at("2026-12-06T21:00:03Z"))
    shown = [(p["role"], p["pid"], p.get("emitsTicks")) for p in find_processes(now=now)]
    assert shown == [("slot-loop", 11, False), ("slot-loop", 22, True), ("worker", 33, None)]
    # An expired lease: nobody emits until one takes it again.
    later = [(p["pid"], p.get("emitsTicks")) for p in find_processes(now=at("2026-12-06T21:00:03Z"))]
    assert later == [(11, False), (22, False), (33, None)]
