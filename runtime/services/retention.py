"""Retention: archive, then delete, what is past the window (docs/production.md, "Retention").

``prune_chunk`` handles one chunk of at most ``CHUNK_EVENTS`` events in one transaction:
it picks the oldest prunable events, gathers their proposals, runs, outbox rows and every
journal entry about them, writes all of it to the archive (JSON Lines, one object a line:
``{"table", "row"}``), flushes the archive to disk, deletes the rows — the journal's through
its guard's one door, ``delete_journal_entries`` — and journals the chunk
(``retention_pruned``: the window, the cutoff, the counts, the archive file). Nothing is
deleted that the archive does not hold first, and an interrupted prune (killed between
chunks or inside one) loses nothing: a chunk is in the database or archived and gone.

An event is **prunable** when, at ``cutoff``:

- it was admitted and planned before ``cutoff``;
- its proposal, if any, is decided (not ``pending``) and its run, if any, is terminal
  (succeeded, failed, abandoned — never queued, claimed, running or ``interrupted``),
  finished before ``cutoff``, with no outbox row still pending;
- no journal entry about it is dated at or after ``cutoff`` (nobody acted on it since);
- its eventId is not one the caller keeps (``keep``: the schedules' last ticks and the
  setting events of keyed rows still in force, which the slot loop and ``schedule rebuild``
  read);
- every event of its correlation is prunable too: a chain goes whole or stays whole, so
  ``journal --correlation`` never tells half a story.

Journal entries of no event (a decision about nothing, an earlier prune's record) dated
before ``cutoff`` are archived and deleted with the first chunk of each run of ``prune``.
Once every chunk is in, ``seal_archive`` writes the archive's SHA-256 beside it
(``<file>.sha256``, as ``sha256sum -c`` reads it) and journals the whole prune
(``retention_archived``).

Captured output of the pruned runs (``FACTORY_RUNS_DIR/<run id>/``) is removed after the
chunk commits (``remove_run_dirs``): a crash there leaves a directory of a run that no
longer exists, which ``remove_orphan_run_dirs`` (every prune's last step) removes.
"""

import gzip
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module
from pathlib import Path

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from runtime.models import (
    TERMINAL_RUN_STATUSES,
    Actor,
    Event,
    JournalEntry,
    OutboxEntry,
    OutboxStatus,
    Preview,
    Proposal,
    ProposalStatus,
    Run,
)
from runtime.services.journal import record

append_only = import_module("runtime.migrations.0002_journal_append_only")

#: Events per chunk: a chunk's transaction (a few hundred rows of each table) stays well
#: under a second, so ticks and intake wait at most that for the write lock.
CHUNK_EVENTS = 500
#: The session setting that opens the journal guard's one door on PostgreSQL (migrations 0007, 0010).
ARCHIVE_SETTING = "factory.journal_archive"


@dataclass
class PruneCounts:
    """Rows archived and deleted, by table; ``run_dirs`` removed under ``FACTORY_RUNS_DIR``."""

    events: int = 0
    proposals: int = 0
    previews: int = 0
    runs: int = 0
    outbox: int = 0
    journal: int = 0
    run_dirs: int = 0
    run_ids: list[int] = field(default_factory=list, repr=False)
    last_event_id: int = 0

    def add(self, other: "PruneCounts") -> None:
        for name in ("events", "proposals", "previews", "runs", "outbox", "journal", "run_dirs"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_json(self) -> dict:
        return {"events": self.events, "proposals": self.proposals, "previews": self.previews, "runs": self.runs,
                "outbox": self.outbox, "journal": self.journal}


def prunable_events(cutoff: datetime, keep: list[QuerySet]) -> QuerySet:
    """The prunable events at ``cutoff`` (see the module's docstring), oldest first.

    ``keep`` holds querysets of eventIds (``values("…")``) never to prune."""
    prunable = Q(admitted_at__lt=cutoff, planned_at__isnull=False)
    for uids in keep:
        prunable &= ~Q(uid__in=uids)
    prunable &= ~Exists(Proposal.objects.filter(event=OuterRef("pk")).filter(
        Q(status=ProposalStatus.PENDING) | Q(created_at__gte=cutoff)))
    prunable &= ~Exists(Run.objects.filter(event=OuterRef("pk")).filter(
        ~Q(status__in=TERMINAL_RUN_STATUSES) | Q(finished_at__isnull=True) | Q(finished_at__gte=cutoff)))
    prunable &= ~Exists(OutboxEntry.objects.filter(run__event=OuterRef("pk"), status=OutboxStatus.PENDING))
    prunable &= ~Exists(JournalEntry.objects.filter(event=OuterRef("pk"), at__gte=cutoff))
    kept_in_chain = Event.objects.filter(correlation_id=OuterRef("correlation_id")).exclude(prunable)
    return Event.objects.filter(prunable).exclude(Exists(kept_in_chain)).order_by("id")


def delete_journal_entries(ids: list[int]) -> int:
    """Delete journal entries through the guard's one door; call inside the chunk's transaction.

    The door is opened for this transaction only and shut again before it commits: on
    SQLite the delete trigger (migration 0002) is dropped and re-created, as ``flush`` does
    (runtime/management/commands/flush.py) — DDL inside the transaction, so no other
    transaction ever sees the journal unguarded; on PostgreSQL ``SET LOCAL
    factory.journal_archive = 'on'`` lets the row trigger pass a DELETE (migration 0010; an
    UPDATE never) and is set back to ``off`` after this statement. A failure rolls
    everything back with the door shut."""
    if not ids:
        return 0
    if not connection.in_atomic_block:
        raise RuntimeError("delete_journal_entries must run inside the transaction that archives the entries")
    table = JournalEntry._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DROP TRIGGER IF EXISTS runtime_journal_no_delete")
            closing = append_only.statements("sqlite", reverse=False)[1:]
        elif connection.vendor == "postgresql":
            # The row trigger lets a DELETE through while the door is open (migration 0010);
            # it is shut again right after, so nothing else in this transaction passes.
            cursor.execute(f"SET LOCAL {ARCHIVE_SETTING} = 'on'")
            closing = [f"SET LOCAL {ARCHIVE_SETTING} = 'off'"]
        else:
            raise RuntimeError(f"no journal door for the {connection.vendor} backend")
        placeholders = ", ".join(["%s"] * len(ids))
        cursor.execute(f"DELETE FROM {table} WHERE id IN ({placeholders})", ids)
        deleted = cursor.rowcount
        for sql in closing:
            cursor.execute(sql)
    return deleted


def _archive(archive, table: str, rows) -> int:
    count = 0
    for row in rows:
        archive.write(json.dumps({"table": table, "row": row}, cls=DjangoJSONEncoder, sort_keys=True) + "\n")
        count += 1
    return count


def count_prunable(cutoff: datetime, keep: list[QuerySet]) -> PruneCounts:
    """What ``prune_chunk`` would archive and delete, all chunks together (``prune --dry-run``)."""
    events = prunable_events(cutoff, keep).values("id")
    orphans = Q(event__isnull=True, proposal__isnull=True, run__isnull=True, at__lt=cutoff)
    return PruneCounts(
        events=events.count(),
        proposals=Proposal.objects.filter(event_id__in=events).count(),
        previews=Preview.objects.filter(proposal__event_id__in=events).count(),
        runs=Run.objects.filter(event_id__in=events).count(),
        outbox=OutboxEntry.objects.filter(run__event_id__in=events).count(),
        journal=JournalEntry.objects.filter(Q(event_id__in=events) | orphans).count(),
    )


def prune_chunk(*, cutoff: datetime, keep: list[QuerySet], archive_path: Path, window: str, now: datetime,
                orphans: bool, after: int = 0) -> PruneCounts:
    """Archive and delete one chunk (``CHUNK_EVENTS`` events with ids above ``after``, and what
    hangs on them); with ``orphans`` also the journal entries of no event dated before
    ``cutoff``. Returns the counts (all 0: nothing left to prune), the ids of the pruned runs
    and the last event id looked at (the next chunk's ``after``: the events kept below it are
    not looked at again)."""
    with transaction.atomic():
        event_ids = list(
            prunable_events(cutoff, keep).filter(id__gt=after).values_list("id", flat=True)[:CHUNK_EVENTS]
        )
        proposals = Proposal.objects.filter(event_id__in=event_ids)
        previews = Preview.objects.filter(proposal__event_id__in=event_ids)
        runs = Run.objects.filter(event_id__in=event_ids)
        outbox = OutboxEntry.objects.filter(run__event_id__in=event_ids)
        about = Q(event_id__in=event_ids)
        if orphans:
            about |= Q(event__isnull=True, proposal__isnull=True, run__isnull=True, at__lt=cutoff)
        journal = JournalEntry.objects.filter(about).order_by("id")
        counts = PruneCounts(last_event_id=event_ids[-1] if event_ids else after)
        if not event_ids and not journal.exists():
            return counts
        with gzip.open(archive_path, "at", encoding="utf-8") as archive:
            counts.journal = _archive(archive, "journal", journal.values())
            counts.outbox = _archive(archive, "outbox", outbox.order_by("id").values())
            counts.runs = _archive(archive, "run", runs.order_by("id").values())
            counts.previews = _archive(archive, "preview", previews.order_by("id").values())
            counts.proposals = _archive(archive, "proposal", proposals.order_by("id").values())
            counts.events = _archive(archive, "event", Event.objects.filter(id__in=event_ids).order_by("id").values())
            archive.flush()
            os.fsync(archive.fileno())
        counts.run_ids = list(runs.values_list("id", flat=True))
        delete_journal_entries(list(journal.values_list("id", flat=True)))
        outbox.delete()
        runs.delete()
        previews.delete()
        proposals.delete()
        Event.objects.filter(id__in=event_ids).delete()
        record("retention_pruned", Actor.SYSTEM, at=now, data={
            "window": window, "cutoff": cutoff.isoformat().replace("+00:00", "Z"),
            "archive": str(archive_path), **counts.as_json(),
        })
    return counts


def seal_archive(archive_path: Path, *, cutoff: datetime, window: str, now: datetime, counts: PruneCounts) -> str:
    """Write ``<archive>.sha256`` (``sha256sum`` format) once every chunk is in, and journal the
    whole prune (``retention_archived``: window, cutoff, archive, sha256, counts). Returns the digest."""
    digest = hashlib.sha256()
    with archive_path.open("rb") as archive:
        for block in iter(lambda: archive.read(1 << 20), b""):
            digest.update(block)
    sha256 = digest.hexdigest()
    archive_path.with_name(archive_path.name + ".sha256").write_text(f"{sha256}  {archive_path.name}\n")
    with transaction.atomic():
        record("retention_archived", Actor.SYSTEM, at=now, data={
            "window": window, "cutoff": cutoff.isoformat().replace("+00:00", "Z"),
            "archive": str(archive_path), "sha256": sha256, **counts.as_json(),
        })
    return sha256


def remove_run_dirs(runs_dir: Path, run_ids: list[int]) -> int:
    """Remove ``runs_dir/<id>/`` of pruned runs; returns how many existed."""
    removed = 0
    for run_id in run_ids:
        directory = runs_dir / str(run_id)
        if directory.is_dir():
            shutil.rmtree(directory)
            removed += 1
    return removed


def remove_orphan_run_dirs(runs_dir: Path) -> int:
    """Remove the run directories whose run no longer exists (a prune interrupted after its
    chunk committed); returns how many. A run's directory is made after its row, so a
    directory without a row is one whose run was pruned."""
    if not runs_dir.is_dir():
        return 0
    names = sorted(int(entry.name) for entry in runs_dir.iterdir() if entry.is_dir() and entry.name.isdigit())
    removed = 0
    for start in range(0, len(names), CHUNK_EVENTS):
        chunk = names[start:start + CHUNK_EVENTS]
        existing = set(Run.objects.filter(id__in=chunk).values_list("id", flat=True))
        removed += remove_run_dirs(runs_dir, [run_id for run_id in chunk if run_id not in existing])
    return removed
