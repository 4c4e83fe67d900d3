"""``runtime.services.retention``'s rules, row by row: which events are prunable (unplanned, a run
whose status and end disagree, an outbox row or a journal entry of another event), what the
journal's door answers, and what a chunk writes to the archive and the journal
(docs/production.md, "Retention")."""

import gzip
import hashlib
import json

import pytest
from django.db import transaction

from runtime.models import Actor, Event, JournalEntry, OutboxEntry, Proposal, Run
from runtime.preview_model import Preview
from runtime.services import retention
from runtime.services.journal import record
from runtime.services.retention import (
    PruneCounts,
    count_prunable,
    delete_journal_entries,
    prunable_events,
    prune_chunk,
    remove_orphan_run_dirs,
    remove_run_dirs,
    seal_archive,
)
from tests.conftest import at
from tests.helpers import step, tick

pytestmark = pytest.mark.django_db

HOURLY_HEARTBEAT = "schedules:\n  heartbeat:\n    every: 60m\n"
CUTOFF = at("2026-09-01T12:00:00Z")
NOW = at("2026-11-30T12:00:00Z")


def old_event(uid: str, *, planned: bool = True) -> Event:
    """An injected event of June, planned (``NOOP``) unless ``planned`` is false."""
    admitted = at("2026-06-01T00:00:00Z")
    return Event.objects.create(
        uid=uid, type="factory.warm.requested", source="operator", subject="s", occurred_at=admitted,
        correlation_id=uid, door="inject", admitted_at=admitted, payload={},
        planned_at=admitted if planned else None, planning_outcome="NOOP" if planned else "",
    )


def _prunable():
    return list(prunable_events(CUTOFF, []).values_list("uid", flat=True))


def test_an_unplanned_event_is_never_prunable():
    """Admitted long ago but not yet planned: kept, while a planned one of the same age goes."""
    old_event("planned")
    old_event("unplanned", planned=False)
    assert _prunable() == ["planned"]


@pytest.fixture
def heartbeats(registry_files):
    """Two heartbeat chains of August run to their end (each an event, a proposal, a run
    succeeded); the second, the loop's last tick, is kept only by ``keep``, which these tests
    do not pass."""
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-08-01T10:00:05Z")
    step("2026-08-01T10:00:10Z")
    tick("2026-08-01T11:00:05Z")
    step("2026-08-01T11:00:10Z")
    first, second = Event.objects.order_by("id")
    return first, second


@pytest.mark.parametrize(("status", "finished"), [
    ("succeeded", None),                            # final, but no end recorded
    ("queued", at("2026-08-01T10:00:20Z")),         # an old end, but active
], ids=["final-without-end", "active-with-end"])
def test_a_run_whose_status_and_end_disagree_keeps_its_event(heartbeats, status, finished):
    """Only a final run that ended before the cutoff lets its event go."""
    first, second = heartbeats
    Run.objects.filter(event=first).update(status=status, finished_at=finished)
    assert _prunable() == [second.uid]


def _outbox(event, status):
    run = Run.objects.get(event=event)
    settled = None if status == "pending" else at("2026-08-01T10:00:30Z")
    return OutboxEntry.objects.create(run=run, position=0, event_uid=f"chain:{run.pk}:0", envelope={"type": "x"},
                                      created_at=at("2026-08-01T10:00:20Z"), status=status, settled_at=settled)


def test_only_a_pending_outbox_row_of_the_event_itself_keeps_it(heartbeats):
    """A published outbox row does not hold its event; a pending one holds its own event only."""
    first, second = heartbeats
    _outbox(first, "published")
    assert _prunable() == [first.uid, second.uid]
    _outbox(second, "pending")
    assert _prunable() == [first.uid]


def test_only_a_young_journal_entry_about_the_event_itself_keeps_it(heartbeats):
    """A journal entry at or after the cutoff holds the event it is about, not another, and an
    entry about no event holds nothing."""
    first, second = heartbeats
    record("note", Actor.SYSTEM, at=CUTOFF)
    assert _prunable() == [first.uid, second.uid]
    record("note", Actor.SYSTEM, at=CUTOFF, event=second)
    assert _prunable() == [first.uid]


def test_the_journals_door_deletes_what_it_is_given_and_says_how_many():
    """Inside the transaction: no ids deletes nothing (0); two ids delete exactly those two, and
    the journal is append-only again afterwards."""
    kept, gone, also_gone = (record("note", Actor.SYSTEM, at=CUTOFF, data={"n": n}) for n in range(3))
    with transaction.atomic():
        assert delete_journal_entries([]) == 0
        assert delete_journal_entries([gone.pk, also_gone.pk]) == 2
    assert list(JournalEntry.objects.filter(action="note").values_list("pk", flat=True)) == [kept.pk]


@pytest.mark.django_db(transaction=True)
def test_the_journals_door_is_shut_outside_a_transaction():
    """Outside a transaction the door refuses, naming why, and deletes nothing."""
    entry = record("note", Actor.SYSTEM, at=CUTOFF)
    with pytest.raises(RuntimeError) as refused:
        delete_journal_entries([entry.pk])
    assert str(refused.value) == "delete_journal_entries must run inside the transaction that archives the entries"
    assert JournalEntry.objects.filter(pk=entry.pk).exists()


def test_a_chunk_writes_sorted_lines_and_journals_its_counts(heartbeats, tmp_path):
    """Each archive line is one JSON object with sorted keys (``row`` before ``table``, the row's
    columns in order); the first chunk takes the entries about nothing from before the cutoff,
    not one at it, and journals the window, the cutoff, the archive and its counts."""
    first, second = heartbeats
    about = JournalEntry.objects.filter(event__in=[first, second]).count()
    orphan = record("note", Actor.SYSTEM, at=at("2026-08-02T00:00:00Z"))
    young = record("note", Actor.SYSTEM, at=CUTOFF)
    published = _outbox(first, "published")
    runs = list(Run.objects.order_by("id").values_list("id", flat=True))
    proposals = list(Proposal.objects.order_by("id").values_list("id", flat=True))
    path = tmp_path / "prune.jsonl.gz"
    counts = prune_chunk(cutoff=CUTOFF, keep=[], archive_path=path, window="90d", now=NOW, orphans=True)
    with gzip.open(path, "rt") as archive:
        lines = archive.read().splitlines()
    assert all(line == json.dumps(json.loads(line), sort_keys=True) for line in lines)
    assert lines[-1].startswith('{"row": {"admitted_at": ')
    assert (counts.events, counts.journal, counts.last_event_id, sorted(counts.run_ids)) == (2, about + 1, second.pk, runs)
    assert [json.loads(line)["row"]["id"] for line in lines if '"action": "note"' in line] == [orphan.pk]
    assert list(JournalEntry.objects.filter(action="note").values_list("pk", flat=True)) == [young.pk]
    rows = [json.loads(line) for line in lines]
    assert [(row["table"], row["row"]["id"]) for row in rows if row["table"] != "journal"] == [
        ("outbox", published.pk), *(("run", pk) for pk in runs), *(("proposal", pk) for pk in proposals),
        ("event", first.pk), ("event", second.pk)]
    (pruned,) = JournalEntry.objects.filter(action="retention_pruned")
    assert (pruned.actor, pruned.at, pruned.data) == ("system", NOW, {
        "window": "90d", "cutoff": "2026-09-01T12:00:00Z", "archive": str(path), "events": 2, "proposals": 2,
        "previews": 0, "runs": 2, "outbox": 1, "journal": counts.journal,
    })
    assert not Event.objects.exists()


def test_the_count_takes_the_entries_of_no_event_from_before_the_cutoff_only(heartbeats):
    """``count_prunable`` (the dry run) counts each table's rows of the prunable events — a preview
    and an outbox row too — and the entries about nothing dated before the cutoff; one at the
    cutoff stays."""
    first, second = heartbeats
    about = JournalEntry.objects.filter(event__in=[first, second]).count()
    record("note", Actor.SYSTEM, at=at("2026-08-02T00:00:00Z"))
    record("note", Actor.SYSTEM, at=CUTOFF)
    _outbox(first, "published")
    Preview.objects.create(proposal=Proposal.objects.get(event=first), status="done", argv=[], timeout_seconds=60,
                           requested_at=at("2026-08-01T10:00:06Z"), registry_digest="0" * 64)
    counts = count_prunable(CUTOFF, [])
    assert counts.as_json() == {"events": 2, "proposals": 2, "previews": 1, "runs": 2, "outbox": 1, "journal": about + 1}


def test_the_seal_is_the_archives_sha256_beside_it_and_journaled(tmp_path):
    """``<archive>.sha256`` in ``sha256sum``'s format, the digest returned, and the whole prune
    journaled with it."""
    path = tmp_path / "prune.jsonl.gz"
    path.write_bytes(b"x" * (3 << 20))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    counts = PruneCounts(events=1, journal=3)
    assert seal_archive(path, cutoff=CUTOFF, window="90d", now=NOW, counts=counts) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prune.jsonl.gz", "prune.jsonl.gz.sha256"]
    assert (tmp_path / "prune.jsonl.gz.sha256").read_text() == f"{digest}  prune.jsonl.gz\n"
    (sealed,) = JournalEntry.objects.filter(action="retention_archived")
    assert (sealed.actor, sealed.at, sealed.data) == ("system", NOW, {
        "window": "90d", "cutoff": "2026-09-01T12:00:00Z", "archive": str(path), "sha256": digest, "events": 1,
        "proposals": 0, "previews": 0, "runs": 0, "outbox": 0, "journal": 3,
    })


def test_run_directories_of_pruned_runs_and_orphans_are_removed_and_counted(heartbeats, tmp_path):
    """``remove_run_dirs`` removes and counts the directories that exist of the runs named;
    ``remove_orphan_run_dirs`` those of no run, leaving a run's own, other names and files,
    and finds nothing to do without a runs directory."""
    runs_dir = tmp_path / "runs"
    first, second = Run.objects.order_by("id")
    for name in (first.pk, second.pk, 1000, 1001, 1002, "notes"):
        (runs_dir / str(name)).mkdir(parents=True, exist_ok=True)
    (runs_dir / "1003").write_text("a file")
    assert remove_run_dirs(runs_dir, [first.pk, 1000, 999]) == 2
    assert remove_orphan_run_dirs(runs_dir) == 2
    assert sorted(p.name for p in runs_dir.iterdir()) == sorted([str(second.pk), "1003", "notes"])
    assert remove_orphan_run_dirs(tmp_path / "nowhere") == 0


def test_orphan_run_directories_are_looked_at_chunk_by_chunk(heartbeats, tmp_path, monkeypatch):
    """Chunks of two (``CHUNK_EVENTS`` made small): every directory is looked at, the first (an
    orphan) and the last too, and the count adds up over the chunks."""
    monkeypatch.setattr(retention, "CHUNK_EVENTS", 2)
    runs_dir = tmp_path / "elsewhere"
    kept = Run.objects.order_by("id").first().pk
    for name in (0, kept, 1000, 1001, 1002, 1003):
        (runs_dir / str(name)).mkdir(parents=True)
    assert remove_orphan_run_dirs(runs_dir) == 5
    assert [p.name for p in runs_dir.iterdir()] == [str(kept)]
