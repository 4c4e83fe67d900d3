"""``manage.py prune``: archive, then delete, finished chains past the window (runtime.services.retention)."""

import gzip
import hashlib
import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from runtime.models import Event, JournalEntry, Proposal, Run, RunStatus
from schedules.models import KeyedSchedule, ScheduleState
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, finish_active_runs, step, tick, unsubscribe

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

HOURLY_HEARTBEAT = "schedules:\n  heartbeat:\n    every: 60m\n"
WATCHED_REAPER = "schedules:\n  reaper:\n    enabled: true\n    every: 60m\n"
NOW = "2026-11-30T12:00:00Z"


@pytest.fixture
def places(settings, tmp_path):
    settings.FACTORY_ARCHIVE_DIR = tmp_path / "archive"
    settings.FACTORY_RUNS_DIR = tmp_path / "runs"
    return tmp_path


def prune(*args) -> str:
    out = StringIO()
    with time_machine.travel(at(NOW), tick=False):
        call_command("prune", *args, stdout=out)
    return out.getvalue()


def archived(places) -> list[dict]:
    (path,) = (places / "archive").glob("*.jsonl.gz")
    with gzip.open(path, "rt") as archive:
        return [json.loads(line) for line in archive]


def two_old_heartbeats():
    """Two hourly heartbeat chains of August, run to their end."""
    tick("2026-08-01T10:00:05Z")
    step("2026-08-01T10:00:10Z")
    tick("2026-08-01T11:00:05Z")
    step("2026-08-01T11:00:10Z")


def test_an_old_finished_chain_is_archived_then_deleted_and_the_last_tick_kept(registry_files, places):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    two_old_heartbeats()
    first, last = Event.objects.order_by("id")
    first_run = Run.objects.get(event=first)
    assert (places / "runs" / str(first_run.pk)).is_dir()
    journal_before = list(JournalEntry.objects.filter(event=first).order_by("id").values_list("id", "action"))

    output = prune("--older-than", "90d")

    archive, checksum = sorted((places / "archive").iterdir())
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert checksum.read_text() == f"{sha256}  {archive.name}\n"
    assert output == (
        f"archived to {archive} (sha256 {sha256}) and deleted 1 events, 1 proposals, 0 previews, 1 runs, 0 outbox rows, "
        f"{len(journal_before)} journal entries (before 2026-09-01T12:00:00Z); 1 run directories removed\n"
    )
    assert list(Event.objects.values_list("uid", flat=True)) == [last.uid]
    assert ScheduleState.objects.get(loop="heartbeat").last_event_id == last.uid
    assert not (places / "runs" / str(first_run.pk)).exists()
    rows = archived(places)
    assert [(row["table"], row["row"]["id"]) for row in rows if row["table"] != "journal"] == [
        ("run", first_run.pk), ("proposal", first_run.proposal_id), ("event", first.pk),
    ]
    assert [(row["row"]["id"], row["row"]["action"]) for row in rows if row["table"] == "journal"] == journal_before
    counts = {"events": 1, "proposals": 1, "previews": 0, "runs": 1, "outbox": 0, "journal": len(journal_before)}
    (pruned,) = JournalEntry.objects.filter(action="retention_pruned")
    assert (pruned.actor, pruned.data) == ("system", {
        "window": "90d", "cutoff": "2026-09-01T12:00:00Z", "archive": str(archive), **counts,
    })
    (sealed,) = JournalEntry.objects.filter(action="retention_archived")
    assert (sealed.actor, sealed.data) == ("system", {
        "window": "90d", "cutoff": "2026-09-01T12:00:00Z", "archive": str(archive), "sha256": sha256, **counts,
    })


def test_the_journal_is_append_only_again_after_a_prune(registry_files, places):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    two_old_heartbeats()
    prune("--older-than", "90d")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM runtime_journalentry")


def test_a_pruned_slot_does_not_fire_again(registry_files, places):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    two_old_heartbeats()
    prune("--older-than", "90d")
    report = tick("2026-08-01T11:30:00Z")
    assert [t.admitted for t in report.ticks if t.admitted] == []
    assert Event.objects.filter(uid="clock:heartbeat:2026-08-01T10:00:00Z").count() == 0


def test_a_pending_proposal_is_never_pruned(registry_files, places):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-08-01T10:00:05Z")
    tick("2026-08-01T11:00:05Z")
    reaper = Proposal.objects.filter(loop="reaper")
    assert list(reaper.values_list("status", flat=True)) == ["pending", "pending"]
    assert prune("--older-than", "90d") == "nothing to prune before 2026-09-01T12:00:00Z\n"
    assert reaper.count() == 2


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.INTERRUPTED])
def test_an_active_or_interrupted_run_is_never_pruned(registry_files, places, status):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-08-01T10:00:05Z")
    tick("2026-08-01T11:00:05Z")  # NOOP: the first run is still in flight; the same loop's chain
    Run.objects.update(status=status)
    prune("--older-than", "90d")
    assert Run.objects.get().status == status
    assert Event.objects.count() == 2


def test_a_dry_run_counts_and_changes_nothing(registry_files, places):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    two_old_heartbeats()
    entries = JournalEntry.objects.count()
    output = prune("--older-than", "90d", "--dry-run")
    first = Event.objects.order_by("id").first()
    journal = JournalEntry.objects.filter(event=first).count()
    assert output == (
        f"dry run: would archive and delete 1 events, 1 proposals, 0 previews, 1 runs, 0 outbox rows, {journal} journal entries "
        "(before 2026-09-01T12:00:00Z)\n"
    )
    assert (Event.objects.count(), JournalEntry.objects.count()) == (2, entries)
    assert not (places / "archive").exists()


def test_a_young_chain_is_kept(registry_files, places):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-01T10:00:05Z")
    step("2026-11-01T10:00:10Z")
    tick("2026-11-01T11:00:05Z")
    finish_active_runs()
    assert prune("--older-than", "90d") == "nothing to prune before 2026-09-01T12:00:00Z\n"
    assert Event.objects.count() == 2


@pytest.mark.parametrize(("window", "message"), [
    ("90", "--older-than takes whole days like 90d, not '90'"),
    ("0d", "--older-than takes whole days like 90d, not '0d'"),
    ("abc", "--older-than takes whole days like 90d, not 'abc'"),
    ("-5d", "--older-than takes whole days like 90d, not '-5d'"),
    ("\u0661\u0662d", "--older-than takes whole days like 90d, not '\u0661\u0662d'"),
    ("100000d", "--older-than takes whole days like 90d, not '100000d'"),
])
def test_a_bad_window_is_refused_in_one_line_naming_it_exit_2(window, message):
    with pytest.raises(CommandError) as refused:
        call_command("prune", f"--older-than={window}")
    assert (str(refused.value), refused.value.returncode) == (message, 2)
    assert Event.objects.count() == 0


def test_a_window_within_the_metrics_window_is_refused_exit_2(settings):
    settings.FACTORY_METRICS_WINDOW_SECONDS = 2 * 86400
    with pytest.raises(CommandError) as refused:
        call_command("prune", "--older-than", "2d")
    assert (str(refused.value), refused.value.returncode) == (
        "--older-than 2d is within /metrics' window (FACTORY_METRICS_WINDOW_SECONDS=172800): the recent figures would drop",
        2,
    )


def test_a_keyed_rows_setting_event_in_force_is_kept_and_rebuild_gives_the_same_rows(registry_files, places):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-07-01T06:00:00Z")
    alice = choose("alice", "09:00", "Europe/Budapest", "2026-07-01T06:10:00Z")
    bob = choose("bob", "10:00", "Europe/Budapest", "2026-07-01T06:20:00Z")
    gone = unsubscribe("bob", "2026-07-01T06:30:00Z")
    tick("2026-07-01T06:30:01Z")
    step("2026-07-01T06:31:00Z")  # the setting events' own runs finish
    before = list(KeyedSchedule.objects.values_list("key", "set_by", "next_due"))
    assert before == [("alice", alice, at("2026-07-01T07:00:00Z"))]
    prune("--older-than", "90d")
    remaining = set(Event.objects.values_list("uid", flat=True))
    assert alice in remaining and not remaining & {bob, gone}
    with time_machine.travel(at(NOW), tick=False):
        call_command("schedule", "rebuild", "customer-digest", stdout=StringIO())
    assert list(KeyedSchedule.objects.values_list("key", "set_by", "next_due")) == before


def old_event(uid: str, correlation: str, admitted: str) -> Event:
    return Event.objects.create(
        uid=uid, type="factory.warm.requested", source="operator", subject="s", occurred_at=at(admitted),
        correlation_id=correlation, door="inject", admitted_at=at(admitted), payload={},
        planned_at=at(admitted), planning_outcome="NOOP",
    )


def test_a_chain_goes_whole_or_stays_whole(places):
    old_event("first", "chain-1", "2026-06-01T00:00:00Z")
    old_event("second", "chain-1", "2026-11-20T00:00:00Z")  # the chain's young end
    old_event("alone", "chain-2", "2026-06-01T00:00:00Z")
    prune("--older-than", "90d")
    assert sorted(Event.objects.values_list("uid", flat=True)) == ["first", "second"]


def test_a_proposals_preview_is_archived_and_deleted_with_it(registry_files, places, approver):
    from unittest import mock

    from runtime.preview_model import Preview
    from runtime.services.approval import reject_proposal
    from runtime.services.preview_execution import preview_one

    registry_files.write_config("schedule.yaml", WATCHED_REAPER + "  heartbeat:\n    enabled: false\n")
    tick("2026-08-01T10:00:05Z")
    tick("2026-08-01T11:00:05Z")
    with mock.patch("runtime.services.preview_execution.database_now", lambda: at("2026-08-01T11:00:07Z")):
        assert preview_one(worker="w")
    newest = Proposal.objects.order_by("id").last()
    for proposal in Proposal.objects.order_by("id"):
        reject_proposal(proposal.pk, user=approver, now=at("2026-08-01T11:01:00Z"))
    kept_event = newest.event.uid
    previews = list(Preview.objects.order_by("id").values_list("id", "proposal_id"))
    assert [proposal for _, proposal in previews] == list(Proposal.objects.order_by("id").values_list("id", flat=True))

    output = prune("--older-than", "90d")

    assert "deleted 1 events, 1 proposals, 1 previews, " in output
    assert [row["row"]["id"] for row in archived(places) if row["table"] == "preview"] == [previews[0][0]]
    assert list(Preview.objects.values_list("proposal__event__uid", flat=True)) == [kept_event]
