"""``manage.py prune [--older-than 90d] [--dry-run]`` (runtime.services.retention; docs/production.md, "Retention").

Archives to ``FACTORY_ARCHIVE_DIR/prune-<instant>.jsonl.gz``, then deletes, chunk by chunk,
the events older than the window whose chains are finished and decided, with their
proposals, runs, outbox rows and journal entries, and the captured output of those runs.
Never a pending proposal, an active or interrupted run, a loop's last tick or a keyed
row's setting event (the slot loop and ``schedule rebuild`` read them); never
``ScheduleState`` or keyed rows. Each chunk is journaled (``retention_pruned``), and the
whole prune with the archive's SHA-256, also written beside it (``retention_archived``). Prints
what it archived and deleted; ``--dry-run`` prints what it would and changes nothing.

Exit 2 when the window is refused (not whole days, or within /metrics' window), as
``schedule`` refuses a bad ``--since``: one line naming the option and the value.
"""

import re
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lib.instants import format_instant
from runtime import clock
from runtime.services.retention import (
    PruneCounts,
    count_prunable,
    prune_chunk,
    remove_orphan_run_dirs,
    remove_run_dirs,
    seal_archive,
)
from schedules.models import KeyedSchedule, ScheduleState

WINDOW = re.compile(r"([1-9][0-9]{0,4})d")
EXIT_REFUSED = 2


def kept_event_ids() -> list:
    """The eventIds the slot loop and ``schedule rebuild`` read: each loop's last tick, each
    keyed row's last tick and the setting event in force."""
    return [
        ScheduleState.objects.exclude(last_event_id="").values("last_event_id"),
        KeyedSchedule.objects.exclude(last_event_id="").values("last_event_id"),
        KeyedSchedule.objects.values("set_by"),
    ]


def summary(counts: PruneCounts) -> str:
    return (f"{counts.events} events, {counts.proposals} proposals, {counts.previews} previews, {counts.runs} runs, "
            f"{counts.outbox} outbox rows, {counts.journal} journal entries")


class Command(BaseCommand):
    help = "Archive, then delete, finished chains older than the window (default FACTORY_RETENTION_DAYS)."

    def add_arguments(self, parser):
        parser.add_argument("--older-than", default=f"{settings.FACTORY_RETENTION_DAYS}d",
                            help=f"the window, in days: 90d (default {settings.FACTORY_RETENTION_DAYS}d)")
        parser.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")

    def handle(self, *args, **options):
        window = options["older_than"]
        match = WINDOW.fullmatch(window)
        if match is None:
            raise CommandError(f"--older-than takes whole days like 90d, not {window!r}", returncode=EXIT_REFUSED)
        span = timedelta(days=int(match.group(1)))
        if span.total_seconds() <= settings.FACTORY_METRICS_WINDOW_SECONDS:
            raise CommandError(
                f"--older-than {window} is within /metrics' window (FACTORY_METRICS_WINDOW_SECONDS="
                f"{settings.FACTORY_METRICS_WINDOW_SECONDS}): the recent figures would drop",
                returncode=EXIT_REFUSED,
            )
        now = clock.database_now()
        cutoff = now - span
        keep = kept_event_ids()
        if options["dry_run"]:
            counts = count_prunable(cutoff, keep)
            self.stdout.write(f"dry run: would archive and delete {summary(counts)} (before {format_instant(cutoff)})")
            return
        archive_dir = settings.FACTORY_ARCHIVE_DIR
        archive_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        archive = archive_dir / f"prune-{now:%Y%m%dT%H%M%S}Z.jsonl.gz"
        total = PruneCounts()
        after = 0
        while True:
            counts = prune_chunk(cutoff=cutoff, keep=keep, archive_path=archive, window=window, now=now,
                                 orphans=after == 0, after=after)
            if not any(counts.as_json().values()):
                break
            after = counts.last_event_id
            counts.run_dirs = remove_run_dirs(settings.FACTORY_RUNS_DIR, counts.run_ids)
            total.add(counts)
        total.run_dirs += remove_orphan_run_dirs(settings.FACTORY_RUNS_DIR)
        if not any(total.as_json().values()):
            self.stdout.write(f"nothing to prune before {format_instant(cutoff)}")
            return
        sha256 = seal_archive(archive, cutoff=cutoff, window=window, now=now, counts=total)
        self.stdout.write(
            f"archived to {archive} (sha256 {sha256}) and deleted {summary(total)} (before {format_instant(cutoff)}); "
            f"{total.run_dirs} run directories removed"
        )
