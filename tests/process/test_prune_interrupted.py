"""A prune killed midway loses nothing and can be run again (runtime.services.retention; docs/production.md §8)."""

import gzip
import json
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import psycopg
import pytest
from django.db import connection

from tests.conftest import PROJECT_DIR
from tests.processes import MANAGE, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db]

#: Old finished chains: an event, its approved proposal, its succeeded run and two journal entries each.
FILL = """
import django, sys
from datetime import UTC, datetime, timedelta
django.setup()
from runtime.models import Door, Event, JournalEntry, PlanningOutcome, Proposal, Run
count, start = int(sys.argv[1]), datetime(2026, 6, 1, tzinfo=UTC)
events = Event.objects.bulk_create([
    Event(uid=f"old-{n}", type="factory.warm.requested", source="operator", subject="s", occurred_at=start,
          correlation_id=f"old-{n}", door=Door.INJECT, admitted_at=start + timedelta(seconds=n), payload={},
          planned_at=start + timedelta(seconds=n), planning_outcome=PlanningOutcome.APPROVED)
    for n in range(count)
])
proposals = Proposal.objects.bulk_create([
    Proposal(event=e, idempotency_key=e.uid, definition="warm@1", status="approved", plan={},
             registry_digest="d", created_at=e.admitted_at, decided_at=e.admitted_at) for e in events
])
runs = Run.objects.bulk_create([
    Run(proposal=p, event=p.event, idempotency_key=p.idempotency_key, definition="warm@1", status="succeeded",
        attempt=1, max_attempts=1, timeout_seconds=60, plan={}, registry_digest="d", actor="inject",
        queued_at=p.created_at, started_at=p.created_at, finished_at=p.created_at) for p in proposals
])
JournalEntry.objects.bulk_create([
    JournalEntry(at=r.queued_at, action=action, actor="system", event=r.event, run=r, data={})
    for r in runs for action in ("run_queued", "run_succeeded")
])
"""
COUNT = 6_000


def query(runtime, sql: str) -> list[tuple]:
    """``sql`` on the runtime's own database (SQLite file or PostgreSQL), from outside its processes."""
    url = runtime.env["DATABASE_URL"]
    if connection.vendor == "sqlite":
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)) as db:
            return db.execute(sql).fetchall()
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as db:
        return db.execute(sql).fetchall()


def rows(runtime) -> dict[str, set[int]]:
    return {table: {row[0] for row in query(runtime, f"SELECT id FROM runtime_{table}")}
            for table in ("event", "proposal", "run", "journalentry")}


def pruned_entries(runtime) -> list[dict]:
    found = query(runtime, "SELECT data FROM runtime_journalentry WHERE action = 'retention_pruned' ORDER BY id")
    return [data if isinstance(data, dict) else json.loads(data) for (data,) in found]


def archived(directory) -> dict[str, set[int]]:
    found = {"event": set(), "proposal": set(), "run": set(), "journalentry": set()}
    for path in directory.glob("*.jsonl.gz"):
        with gzip.open(path, "rt") as archive:
            for line in archive:
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line of a file whose writer was killed midway
                table = "journalentry" if item["table"] == "journal" else item["table"]
                if table in found:
                    found[table].add(item["row"]["id"])
    return found


def test_a_killed_prune_loses_nothing_and_a_second_one_finishes(runtime, tmp_path):
    env = {**runtime.env, "DJANGO_SETTINGS_MODULE": "factory_site.settings"}
    subprocess.run([sys.executable, "-c", FILL, str(COUNT)], cwd=PROJECT_DIR, env=env, check=True, timeout=300)
    before = rows(runtime)
    archive_dir = tmp_path / "archive"
    prune = subprocess.Popen([sys.executable, MANAGE, "prune", "--older-than", "90d"], cwd=PROJECT_DIR,
                             env={**runtime.env, "FACTORY_ARCHIVE_DIR": str(archive_dir)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def some_chunks_done():
        return len(pruned_entries(runtime)) >= 2

    wait_for(some_chunks_done, timeout=120, what="two chunks pruned", interval=0.05)
    prune.send_signal(signal.SIGKILL)
    prune.communicate(timeout=30)
    middle = rows(runtime)
    assert 0 < len(middle["event"]) < COUNT, "the prune was not killed midway"
    saved = archived(archive_dir)
    for table, ids in before.items():
        assert ids <= middle[table] | saved[table], f"{table} rows lost by the killed prune"

    time.sleep(1)  # the second prune's archive file is named by the second
    second = subprocess.run([sys.executable, MANAGE, "prune", "--older-than", "90d"], cwd=PROJECT_DIR,
                            env={**runtime.env, "FACTORY_ARCHIVE_DIR": str(archive_dir)},
                            capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    after, saved = rows(runtime), archived(archive_dir)
    assert (after["event"], after["proposal"], after["run"]) == (set(), set(), set())
    for table, ids in before.items():
        assert ids <= saved[table], f"{table} rows neither in the database nor archived"
    assert sum(entry["events"] for entry in pruned_entries(runtime)) == COUNT
