"""A run's claim, start and finish send only the statements they need (issue 29; docs/performance.md,
"Statements per operation"): the claim is one ``UPDATE … RETURNING`` of the run, with no
second read; on PostgreSQL the start and a quiet finish are one statement each; the sweep of expired
leases runs only when one has expired; a finish reads the run's event only when its outcome
chains."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runtime.adapters.base import RunResult
from runtime.clock import database_now
from runtime.models import JournalEntry, Run, RunStatus
from runtime.preview_model import Preview
from runtime.registry import get_registry
from runtime.services import execution
from runtime.services.planning import plan_pending
from runtime.services.runs import _finish_recorded, claim_next_run, finish_run, start_run, waiting_work
from schedules.ticks import emit_due_ticks
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T22:00:20Z")


def statements(queries) -> list[str]:
    """The statements sent, less the savepoints the test's own transaction turns blocks into."""
    return [q["sql"].split()[0] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def queued_heartbeat() -> Run:
    emit_due_ticks(now=NOW, registry=get_registry())
    plan_pending(now=NOW)
    return Run.objects.get(definition="heartbeat@1", status=RunStatus.QUEUED)


def test_a_claim_is_the_pick_one_update_returning_the_run_the_lanes_turn_and_its_journal_entry():
    queued = queued_heartbeat()
    with CaptureQueriesContext(connection) as queries:
        run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    if connection.vendor == "postgresql":  # the four as common table expressions of one statement
        assert statements(queries) == ["WITH"]
        [claim] = [q["sql"] for q in queries if q["sql"].startswith("WITH")]
        assert all(part in claim for part in ("FOR UPDATE OF run SKIP LOCKED", "RETURNING run.*",
                                                          "runtime_queuelane", "run_claimed"))
    else:
        assert statements(queries) == ["SELECT", "UPDATE", "INSERT", "INSERT"]
        assert "RETURNING" in queries[[q["sql"].split()[0] for q in queries].index("UPDATE")]["sql"]
    claimed = JournalEntry.objects.get(run_id=queued.pk, action="run_claimed")
    assert (claimed.at, claimed.actor, claimed.event_id, claimed.data) == (
        NOW, "system", queued.event_id, {"worker": "w1", "attempt": 1})
    stored = Run.objects.get(pk=queued.pk)
    assert (run.pk, run.status, run.attempt, run.worker, run.claimed_at, run.lease_expires_at) == (
        stored.pk, "claimed", 1, "w1", NOW, at("2026-11-30T22:01:20Z"))
    assert {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields} == {
        f.attname: getattr(stored, f.attname) for f in Run._meta.concrete_fields}


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite claims with a compare-and-swap")
@pytest.mark.parametrize("status", [RunStatus.CLAIMED, RunStatus.SUCCEEDED])
def test_a_claim_on_sqlite_takes_a_run_only_while_it_is_still_queued(monkeypatch, status):
    queued = queued_heartbeat()
    Run.objects.filter(pk=queued.pk).update(status=status, attempt=1, worker="w0")
    picks = iter([(queued.pk, queued.lane), None])  # as a pick made just before the change
    monkeypatch.setattr("runtime.services.runs.next_claimable", lambda *, lock: next(picks))
    assert claim_next_run(worker="w1", now=NOW, lease_seconds=60) is None
    assert Run.objects.filter(pk=queued.pk).values_list("status", "attempt", "worker").get() == (status, 1, "w0")


def answer(waiting) -> tuple[bool, bool, bool]:
    """``waiting_work``'s answer less its instant."""
    return waiting.queued, waiting.expired, waiting.previews


def test_the_sweep_runs_only_when_a_lease_has_expired(monkeypatch):
    queued = queued_heartbeat()
    swept = []
    monkeypatch.setattr(execution, "expire_leases", lambda *, now: swept.append(now) or 0)
    monkeypatch.setattr(execution, "execute_run", lambda run, **kwargs: None)
    assert answer(waiting_work()) == (True, False, False)
    assert execution.work_one(worker="w1") and swept == []
    run = Run.objects.get(pk=queued.pk)
    assert (run.status, run.lease_expires_at > database_now()) == ("claimed", True)
    assert answer(waiting_work()) == (False, False, False)
    Run.objects.filter(pk=queued.pk).update(lease_expires_at=database_now() - timedelta(seconds=1))
    assert answer(waiting_work(margin=timedelta(seconds=5))) == (False, False, False)  # within the margin
    assert answer(waiting_work(margin=timedelta(0))) == (False, True, False)
    Run.objects.filter(pk=queued.pk).update(lease_expires_at=database_now() - timedelta(hours=1))
    assert answer(waiting_work()) == (False, True, False)
    pinned = waiting_work(clock=lambda: at("2026-11-30T21:00:00Z"))  # a caller's clock: the lease is not over then
    assert (pinned.now, answer(pinned)) == (at("2026-11-30T21:00:00Z"), (False, False, False))
    assert not execution.work_one(worker="w1") and len(swept) == 1


def test_an_idle_worker_asks_one_statement_for_both_its_threads():
    told = []
    with CaptureQueriesContext(connection) as queries:
        assert execution.work_one(worker="w1", previews=told.append) is False
    assert statements(queries) == ["SELECT"]
    assert told == [False]
    before = database_now()
    waiting = waiting_work()
    assert before <= waiting.now <= database_now() and waiting.now.tzinfo is not None


def test_an_open_preview_is_told_to_the_preview_thread(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n")
    tick("2026-11-30T21:00:10Z")
    preview = Preview.objects.get()
    assert preview.status == "pending"
    told = []
    execution.work_one(worker="w1", previews=told.append)
    assert told == [True] and answer(waiting_work())[2] is True
    Preview.objects.filter(pk=preview.pk).update(status="running", started_at=at("2026-11-30T21:00:11Z"),
                                                 deadline_at=at("2026-11-30T21:02:11Z"), worker="w1")
    assert answer(waiting_work())[2] is True
    Preview.objects.filter(pk=preview.pk).update(status="done")
    assert answer(waiting_work())[2] is False


def test_the_preview_thread_is_told_no_word_before_a_claimed_run_is_executed(monkeypatch):
    queued_heartbeat()
    told, seen = [], []
    monkeypatch.setattr(execution, "execute_run", lambda run, **kwargs: seen.append(list(told)))
    assert execution.work_one(worker="w1", previews=told.append) is True
    assert seen == [[False, None]]


def test_a_finish_reads_the_event_only_when_the_outcome_chains():
    queued_heartbeat()
    run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert start_run(run, worker="w1", now=NOW)
    with CaptureQueriesContext(connection) as queries:
        assert finish_run(run, RunResult("HEALTHY", True, exit_code=0), worker="w1", now=NOW)
    assert "runtime_event" not in " ".join(q["sql"] for q in queries if q["sql"].startswith("SELECT"))
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def started_entry(run_id: int) -> tuple:
    entry = JournalEntry.objects.get(run_id=run_id, action="run_started")
    return entry.at, entry.actor, entry.actor_name, entry.event_id, entry.proposal_id, entry.data


def test_a_start_moves_the_run_to_running_and_journals_it_in_one_statement_on_postgresql():
    queued_heartbeat()
    run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    later = NOW + timedelta(seconds=1)
    with CaptureQueriesContext(connection) as queries:
        assert start_run(run, worker="w1", now=later) is True
    # In the test's transaction: SQLite's BEGIN and COMMIT are its savepoints.
    assert statements(queries) == (["WITH"] if connection.vendor == "postgresql" else ["UPDATE", "INSERT"])
    assert Run.objects.filter(pk=run.pk).values_list("status", "started_at", "worker").get() == ("running", later, "w1")
    assert started_entry(run.pk) == (later, "system", "", run.event_id, None, {"worker": "w1", "attempt": 1})


@pytest.mark.parametrize("lost", ["another worker", "not claimed"])
def test_a_start_after_the_lease_was_lost_changes_and_journals_nothing(lost):
    queued_heartbeat()
    run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    if lost == "another worker":
        Run.objects.filter(pk=run.pk).update(worker="w2")
    else:
        Run.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED)
    assert start_run(run, worker="w1", now=NOW) is False
    assert Run.objects.get(pk=run.pk).started_at is None
    assert not JournalEntry.objects.filter(run_id=run.pk, action="run_started").exists()


def running_heartbeat(slot: int = 0) -> Run:
    """The heartbeat's run of its ``slot``-th slot from ``NOW``, claimed and started by ``w1`` (a
    singleton: the run of the slot before must have ended)."""
    emit_due_ticks(now=NOW + timedelta(minutes=5 * slot), registry=get_registry())
    plan_pending(now=NOW + timedelta(minutes=5 * slot))
    run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert start_run(run, worker="w1", now=NOW)
    return run


FINISHED = ("status", "finished_at", "lease_expires_at", "outcome", "reason", "summary", "result_data", "exit_code",
            "stdout_path")
RESULT = RunResult("HEALTHY", True, reason="", summary="all well", data={"checks": [1, "two"]}, exit_code=0,
                   stdout_path="runs/1/health.json", extra={"stderrTail": "é"})


def finished_entry(run_id: int) -> tuple:
    entry = JournalEntry.objects.get(run_id=run_id, action="run_succeeded")
    return entry.at, entry.actor, entry.actor_name, entry.proposal_id, entry.data


def test_a_quiet_finish_is_one_statement_on_postgresql_and_writes_what_the_orm_path_writes():
    quiet = running_heartbeat()
    later = NOW + timedelta(seconds=3)
    with CaptureQueriesContext(connection) as queries:
        assert finish_run(quiet, RESULT, worker="w1", now=later) is True
    if connection.vendor == "postgresql":
        assert statements(queries) == ["WITH"]
    through_orm = running_heartbeat(1)
    assert _finish_recorded(through_orm, RESULT, RunStatus.SUCCEEDED, False, worker="w1", now=later,
                            registry=get_registry()) == (True, None)
    rows = {run.pk: Run.objects.filter(pk=run.pk).values_list(*FINISHED).get() for run in (quiet, through_orm)}
    assert rows[quiet.pk] == rows[through_orm.pk] == (
        "succeeded", later, None, "HEALTHY", "", "all well", {"checks": [1, "two"]}, 0, "runs/1/health.json")
    assert finished_entry(quiet.pk) == finished_entry(through_orm.pk) == (
        later, "system", "", None, {"outcome": "HEALTHY", "reason": "", "exitCode": 0, "stderrTail": "é"})
    assert JournalEntry.objects.get(run_id=quiet.pk, action="run_succeeded").event_id == quiet.event_id


def test_a_quiet_finish_without_data_or_exit_code_stores_nulls():
    run = running_heartbeat()
    assert finish_run(run, RunResult("HEALTHY", True, exit_code=None), worker="w1", now=NOW) is True
    assert Run.objects.filter(pk=run.pk).values_list("result_data", "exit_code", "finished_at").get() == (None, None, NOW)
    assert finished_entry(run.pk) == (NOW, "system", "", None, {"outcome": "HEALTHY", "reason": "", "exitCode": None})


def test_a_finish_after_the_lease_was_lost_is_discarded_and_said(caplog):
    run = running_heartbeat()
    Run.objects.filter(pk=run.pk).update(worker="w2")
    with caplog.at_level("WARNING", logger="runtime.services.runs"):
        assert finish_run(run, RESULT, worker="w1", now=NOW) is False
    assert Run.objects.get(pk=run.pk).status == "running"
    assert not JournalEntry.objects.filter(run_id=run.pk, action="run_succeeded").exists()
    assert [r.action for r in caplog.records if r.levelname == "WARNING"] == ["run_result_discarded"]
