"""Benchmark: ``GET /metrics`` over a large history.

Not a test. Fills a throw-away SQLite database (or the empty database ``--database-url``
names, which it migrates) with ``--events`` admitted ticks of ``--loops`` loops spread over
the last 90 days (so the window of ``FACTORY_METRICS_WINDOW_SECONDS`` holds only the last
hour's share), the newest ``--runs`` of them proposed and run to their end, and
``--pending`` pending proposals; then times ``GET /metrics`` through Django's test client
(warm) and counts its queries. Prints the figures, the machine (cores, load average) and
the database and its version. The goal: under 500 ms whatever the history's size.

    .venv/bin/python bench/metrics_bench.py [--events 1000000] [--loops 100000] [--runs 20000]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
GOAL_MS = 500
TOKEN = "bench-token"
CHUNK = 10_000


def fill(events: int, loops: int, runs: int, pending: int, now: datetime) -> None:
    from lib.instants import format_instant
    from runtime.models import Door, Event, PlanningOutcome, Proposal, ProposalStatus, Run, RunStatus

    span = timedelta(days=90)
    for first in range(0, events, CHUNK):
        batch = []
        for n in range(first, min(first + CHUNK, events)):
            admitted = now - span + span * (n / events)
            slot = admitted - timedelta(seconds=1)
            loop = f"loop-{n % loops:06d}"
            uid = f"clock:{loop}:{format_instant(slot)}:{n}"
            batch.append(Event(
                uid=uid, type="clock.tick.reaper", source="schedule", subject=loop, occurred_at=slot,
                correlation_id=uid, door=Door.SCHEDULE, admitted_at=admitted,
                payload={"loop": loop, "slot": format_instant(slot), "cadenceSeconds": 300, "skippedSlots": 0},
                loop=loop, slot=slot, planned_at=admitted, planning_outcome=PlanningOutcome.APPROVED,
            ))
        Event.objects.bulk_create(batch)
    newest = list(Event.objects.order_by("-id")[: runs + pending])
    for start in range(0, len(newest), CHUNK):
        chunk = newest[start:start + CHUNK]
        proposals = Proposal.objects.bulk_create([
            Proposal(event=e, idempotency_key=e.uid, loop=e.loop, definition="reaper@1",
                     status=ProposalStatus.PENDING if start + i < pending else ProposalStatus.APPROVED,
                     plan={}, registry_digest="bench", created_at=e.admitted_at,
                     decided_at=None if start + i < pending else e.admitted_at)
            for i, e in enumerate(chunk)
        ])
        Run.objects.bulk_create([
            Run(proposal=p, event=p.event, idempotency_key=p.idempotency_key, definition="reaper@1", loop=p.loop,
                status=RunStatus.SUCCEEDED, attempt=1, max_attempts=1, timeout_seconds=60, plan={},
                registry_digest="bench", actor="schedule", queued_at=p.created_at, started_at=p.created_at,
                finished_at=p.created_at + timedelta(seconds=3), outcome="REAPED")
            for p in proposals if p.status == ProposalStatus.APPROVED
        ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--loops", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--pending", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database-url", help="an empty database to migrate and fill (default: a temporary SQLite file)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="metrics-bench-"))
    os.environ.update({
        "DATABASE_URL": args.database_url or f"sqlite:///{root / 'bench.sqlite3'}",
        "FACTORY_API_TOKEN": TOKEN,
        "FACTORY_LOG_LEVEL": "WARNING",
        "FACTORY_VAR_DIR": str(root / "var"),
        "DJANGO_SETTINGS_MODULE": "factory_site.settings",
    })
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    try:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        fill(args.events, args.loops, args.runs, args.pending, datetime.now(UTC))
        fill_s = time.perf_counter() - started
        with connection.cursor() as cursor:
            # As autovacuum (PostgreSQL) or an operator's ANALYZE would: plans need the tables' statistics.
            cursor.execute("ANALYZE")
            cursor.execute("SELECT sqlite_version()" if connection.vendor == "sqlite" else "SHOW server_version")
            version = cursor.fetchone()[0]
        print(f"{args.events} events of {args.loops} loops over 90 days, {args.runs} finished runs, "
              f"{args.pending} pending proposals (filled in {fill_s:.0f} s)")
        print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
              f"database {connection.vendor} {version}")
        client = Client()

        def scrape():
            response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code == 200, response.content[:500]
            return response

        queries = []

        def count(execute, sql, params, many, context):
            start = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                queries.append(((time.perf_counter() - start) * 1000, sql))

        with connection.execute_wrapper(count):
            body = scrape().content
        samples = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            scrape()
            samples.append((time.perf_counter() - start) * 1000)
        median = statistics.median(samples)
        verdict = "ok" if median < GOAL_MS else f"OVER the {GOAL_MS} ms goal"
        print(f"GET /metrics: median {median:.1f} ms, min {min(samples):.1f} ms ({args.repeat} runs; {verdict}); "
              f"{len(queries)} queries, {len(body.splitlines())} lines, {len(body)} bytes")
        for spent, sql in sorted(queries, reverse=True)[:3]:
            print(f"  slowest query {spent:7.1f} ms: {sql[:160]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
