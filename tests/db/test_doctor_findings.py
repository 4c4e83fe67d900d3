"""The doctor's findings about runs, loops and clocks, each a key of ``/status`` (docs/design.md §11; docs/schedules.md)."""

from datetime import timedelta

import pytest

from ops import process_rows
from ops.doctor import collect_status
from ops.doctor_checks import find_stuck_loops
from ops.models import ProcessRecord
from runtime.models import Run, RunStatus
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

HEARTBEAT_ONLY = "schedules:\n  reaper:\n    enabled: false\n"


@pytest.fixture
def heartbeat_run(registry_files) -> Run:
    """The heartbeat's 21:05 tick, auto-approved at 21:07: one queued run."""
    registry_files.write_config("schedule.yaml", HEARTBEAT_ONLY)
    tick("2026-11-30T21:07:00Z")
    return Run.objects.get()


def status(instant: str) -> dict:
    return collect_status(now=at(instant))


def test_a_running_run_whose_lease_expired_is_an_expired_lease(heartbeat_run):
    Run.objects.filter(pk=heartbeat_run.pk).update(
        status=RunStatus.RUNNING, worker="host-a:41:1", lease_expires_at=at("2026-11-30T21:08:00Z")
    )
    assert status("2026-11-30T21:08:00Z")["expiredLeases"] == []
    document = status("2026-11-30T21:08:01Z")
    assert document["expiredLeases"] == [{
        "id": heartbeat_run.pk, "definition": "heartbeat@1", "worker": "host-a:41:1",
        "leaseExpiredAt": "2026-11-30T21:08:00Z",
    }]
    assert "expiredLeases" in document["anomalies"]


def test_a_claimed_run_whose_lease_expired_is_listed_too(heartbeat_run):
    Run.objects.filter(pk=heartbeat_run.pk).update(
        status=RunStatus.CLAIMED, worker="host-b:7:1", lease_expires_at=at("2026-11-30T21:07:30Z")
    )
    assert [lease["id"] for lease in status("2026-11-30T21:07:31Z")["expiredLeases"]] == [heartbeat_run.pk]


def test_an_interrupted_run_is_listed_until_an_operator_decides(heartbeat_run):
    Run.objects.filter(pk=heartbeat_run.pk).update(
        status="interrupted", worker="host-a:41:1", attempt=1, reason="worker_stopped"
    )
    document = status("2026-11-30T21:07:01Z")
    assert document["interruptedRuns"] == [{
        "id": heartbeat_run.pk, "definition": "heartbeat@1", "loop": "heartbeat", "worker": "host-a:41:1",
        "attempt": 1, "reason": "worker_stopped",
    }]
    assert "interruptedRuns" in document["anomalies"]
    Run.objects.filter(pk=heartbeat_run.pk).update(status=RunStatus.FAILED)
    assert status("2026-11-30T21:07:02Z")["interruptedRuns"] == []


def test_a_queued_run_older_than_its_loops_cadence_starves_the_queue(heartbeat_run):
    assert status("2026-11-30T21:12:00Z")["starvedQueue"] == []
    document = status("2026-11-30T21:12:01Z")
    assert document["starvedQueue"] == [{
        "loop": "heartbeat", "queued": 1, "oldestQueuedAt": "2026-11-30T21:07:00Z",
        "waitedSeconds": 301.0, "periodSeconds": 300,
    }]
    assert "starvedQueue" in document["anomalies"]


def test_a_queued_run_older_than_the_backlog_threshold_is_a_run_backlog_whatever_its_loop(heartbeat_run, settings):
    settings.FACTORY_BACKLOG_WARN_SECONDS = 600
    assert status("2026-11-30T21:17:00Z")["runBacklog"] == []
    document = status("2026-11-30T21:17:01Z")
    assert document["runBacklog"] == [{
        "queued": 1, "oldestQueuedAt": "2026-11-30T21:07:00Z", "waitedSeconds": 601.0,
        "warnRuns": 1000, "warnSeconds": 600,
    }]
    assert ("runBacklog" in document["anomalies"], document["ok"]) == (True, False)


def test_three_ticks_that_found_the_run_in_flight_make_a_stuck_loop(heartbeat_run, django_assert_num_queries):
    tick("2026-11-30T21:10:00Z")
    tick("2026-11-30T21:15:00Z")
    assert status("2026-11-30T21:15:01Z")["stuckLoops"] == []
    tick("2026-11-30T21:20:00Z")
    with django_assert_num_queries(2):
        stuck = find_stuck_loops()
    assert stuck == [{"loop": "heartbeat", "eventIds": [
        "clock:heartbeat:2026-11-30T21:20:00Z", "clock:heartbeat:2026-11-30T21:15:00Z",
        "clock:heartbeat:2026-11-30T21:10:00Z",
    ]}]
    assert "stuckLoops" in status("2026-11-30T21:20:01Z")["anomalies"]
    Run.objects.filter(pk=heartbeat_run.pk).update(status=RunStatus.SUCCEEDED)
    tick("2026-11-30T21:25:00Z")
    assert status("2026-11-30T21:25:01Z")["stuckLoops"] == []


def test_a_process_seen_recently_with_a_skewed_clock_is_clock_skew(registry_files, monkeypatch):
    database = at("2026-11-30T21:00:00Z")
    monkeypatch.setattr(process_rows.clock, "database_now", lambda: database)
    monkeypatch.setattr(process_rows.time, "time", lambda: database.timestamp() + 90.0)
    skewed = process_rows.register("slot-loop")
    monkeypatch.setattr(process_rows.time, "time", lambda: database.timestamp())
    process_rows.register("worker")
    assert skewed.clock_offset_seconds == pytest.approx(90.0)

    document = status("2026-11-30T21:00:10Z")
    assert document["clockSkew"] == [{
        "role": "slot-loop", "host": skewed.host, "pid": skewed.pid, "startedAt": "2026-11-30T21:00:00Z",
        "lastSeenAt": "2026-11-30T21:00:00Z", "clockOffsetSeconds": 90.0, "emitsTicks": False,
    }]
    assert [p["role"] for p in document["processes"]] == ["slot-loop", "worker"]
    assert "clockSkew" in document["anomalies"]
    # A process not seen for four refreshes is gone: neither listed nor skewed.
    later = status("2026-11-30T21:01:01Z")
    assert (later["clockSkew"], later["processes"]) == ([], [])


def test_a_refresh_moves_last_seen_and_rows_of_long_gone_processes_are_pruned(registry_files, monkeypatch):
    now = [at("2026-11-30T21:00:00Z")]
    monkeypatch.setattr(process_rows.clock, "database_now", lambda: now[0])
    monkeypatch.setattr(process_rows.time, "time", lambda: now[0].timestamp() - 0.5)
    old = process_rows.register("worker")
    now[0] += timedelta(seconds=15)
    process_rows.refresh(old)
    assert ProcessRecord.objects.values_list("last_seen_at", "clock_offset_seconds").get() == (
        at("2026-11-30T21:00:15Z"), -0.5,
    )
    now[0] += timedelta(days=1, seconds=1)
    fresh = process_rows.register("worker")
    assert list(ProcessRecord.objects.values_list("pk", flat=True)) == [fresh.pk]
