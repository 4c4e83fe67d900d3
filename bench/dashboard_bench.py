"""Benchmark: the loops dashboard (``GET /dashboard/`` and its table) at 10,000 and 100,000 loops.

Not a test. For each size, in a process of its own: a throw-away registry of N watched loops
(copies of the reaper, enabled), a throw-away SQLite database (or the empty database
``--database-url`` names, which it migrates and fills; give one per size), one tick per loop
planned PROPOSED with a pending proposal, the loops' states (a tenth of them late, all of them
stopped by the benchmark's instant: the worst page, every loop a problem), then times, warm
(the registry loaded, a staff session signed in):

- ``GET /dashboard/`` (the page, its first page of loops) and ``GET /dashboard/table/?page=N``
  (the last page) through Django's test client, with the number of queries each ran;
- ``collect_status`` alone, the doctor's share of it.

Prints the figures in milliseconds with the machine (cores, load average, database).

    .venv/bin/python bench/dashboard_bench.py [--loops 10000 100000] [--repeat 3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
SLOT = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)


def build_registry(root: Path, loops: int) -> tuple[Path, Path]:
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    template = {**schedules["reaper"], "enabled": True}
    (registry_dir / "schedules.json").write_text(json.dumps({f"loop-{i:06d}": template for i in range(loops)}))
    return registry_dir, config_dir


def fill_database(loops: int) -> None:
    """Per loop: one tick of 21:00 planned PROPOSED, its pending proposal and its state as the slot
    loop leaves it, next due 22:00 (every tenth admitted 9 s late)."""
    from lib.instants import format_instant
    from runtime.models import Door, Event, PlanningOutcome, Proposal
    from runtime.registry import store
    from schedules.models import ScheduleState, SlotLoopStatus

    digest = store.current().digest
    uid = "clock:{}:" + format_instant(SLOT)
    for first in range(0, loops, 5000):
        names = [f"loop-{i:06d}" for i in range(first, min(first + 5000, loops))]
        admitted = {name: SLOT + timedelta(seconds=9 if i % 10 == 0 else 1) for i, name in enumerate(names)}
        Event.objects.bulk_create([
            Event(uid=uid.format(name), type="clock.tick.reaper", source="schedule", subject=name, occurred_at=SLOT,
                  correlation_id=uid.format(name), door=Door.SCHEDULE, admitted_at=admitted[name],
                  payload={"loop": name, "skippedSlots": 0}, loop=name, slot=SLOT, planned_at=admitted[name],
                  planning_outcome=PlanningOutcome.PROPOSED)
            for name in names
        ], batch_size=1000)
        Proposal.objects.bulk_create([
            Proposal(event_id=pk, idempotency_key=event_uid, loop=loop, singleton_key=loop, definition="reaper@1",
                     plan={}, registry_digest=digest, created_at=SLOT)
            for pk, event_uid, loop in Event.objects.filter(loop__in=names).values_list("pk", "uid", "loop")
        ], batch_size=1000)
        ScheduleState.objects.bulk_create([
            ScheduleState(loop=name, last_slot=SLOT, last_event_id=uid.format(name), last_tick_at=admitted[name],
                          enabled=True, enabled_since=SLOT - timedelta(days=1), next_due=SLOT + timedelta(hours=1))
            for name in names
        ], batch_size=1000)
    SlotLoopStatus.objects.create(name="slot-loop", last_iteration_at=NOW, pid=1, host="bench")


def measure(loops: int, repeat: int, database_url: str | None) -> None:
    root = Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    registry_dir, config_dir = build_registry(root, loops)
    os.environ.update({
        "DATABASE_URL": database_url or f"sqlite:///{root / 'bench.sqlite3'}",
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "factory_site.settings",
    })
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from unittest import mock

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.core.signals import request_started
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from ops.doctor import collect_status
    from runtime.registry import store

    # Each request would empty the query log the counts are read from.
    request_started.disconnect(reset_queries)
    try:
        call_command("migrate", verbosity=0)
        start = time.perf_counter()
        store.current()
        load_ms = (time.perf_counter() - start) * 1000
        fill_database(loops)
        client = Client()
        client.force_login(User.objects.create_user("bench", is_staff=True))
        last_page = -(-loops // 50)
        print(f"{loops} loops, one pending proposal each; database {connection.vendor} "
              f"{connection.Database.sqlite_version if connection.vendor == 'sqlite' else connection.pg_version}; "
              f"registry load {load_ms:.0f} ms")
        with mock.patch("runtime.clock.database_now", lambda: NOW):
            for label, path in (("GET /dashboard/", "/dashboard/"),
                                (f"GET /dashboard/table/?page={last_page}", f"/dashboard/table/?page={last_page}")):
                assert client.get(path).status_code == 200  # warm
                with CaptureQueriesContext(connection) as queries:
                    assert client.get(path).status_code == 200
                count = len(queries)
                samples = []
                for _ in range(repeat):
                    start = time.perf_counter()
                    client.get(path)
                    samples.append((time.perf_counter() - start) * 1000)
                print(f"  {label:<40} median {statistics.median(samples):9.1f} ms  min {min(samples):9.1f} ms  "
                      f"{count} queries")
            samples = []
            for _ in range(repeat):
                start = time.perf_counter()
                collect_status(now=NOW)
                samples.append((time.perf_counter() - start) * 1000)
            print(f"  {'collect_status (the doctor alone)':<40} median {statistics.median(samples):9.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database-url", nargs="*", default=[], help="one empty database per size (default: SQLite files)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        measure(args.loops[0], args.repeat, args.database_url[0] if args.database_url else None)
        return
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for i, loops in enumerate(args.loops):
        urls = ["--database-url", args.database_url[i]] if i < len(args.database_url) else []
        subprocess.run([sys.executable, __file__, "--one", "--loops", str(loops), "--repeat", str(args.repeat), *urls],
                       check=True)


if __name__ == "__main__":
    main()
