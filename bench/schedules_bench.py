"""Benchmark: the reads a person or a monitor makes at 10,000 and 100,000 loops — the doctor,
``GET /schedules`` (a page and the whole list), ``schedule list`` and the dashboard's table.

Not a test. For each size, in a process of its own: a throw-away registry of N watched loops
(copies of the reaper, enabled, hourly), a throw-away SQLite database (or the PostgreSQL
database ``--database-url`` names, dropped and created again: give one per size), and per
loop ``--history`` hourly ticks planned PROPOSED with a pending proposal each and its state
as the slot loop leaves it (last slot, last tick, ``next_due``). One loop in
``--stopped-every`` stopped three hours before the benchmark's instant, so the doctor has
loops to report. Then, warm (the registry loaded, the instant pinned), the median of
``--repeat`` runs of each read with the statements it made:

- ``doctor``: ``collect_status``, the ``GET /status`` document, serialised;
- ``GET /schedules?page=1`` and ``?page=<last>`` (50 loops), and ``GET /schedules`` (every loop);
- ``schedule list`` (the text a person reads) and ``schedule list --json`` (every loop);
- ``GET /dashboard/table/`` (its first page of 50, problems first).

Prints a Markdown table (docs/performance.md, "Reading at 100,000 loops") and the machine.

    .venv/bin/python bench/schedules_bench.py [--loops 10000 100000] [--repeat 3] \\
        [--database-url postgres://postgres@127.0.0.1:5432/bench_reads_10k postgres://…/bench_reads_100k]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_env import (  # noqa: E402 (the bench's own directory first)
    database_version,
    machine_line,
    make_root,
    prepare_database,
    setup_django,
    table,
)

BASE_DIR = Path(__file__).resolve().parent.parent
TOKEN = "bench-token"
NOW = datetime(2026, 11, 30, 21, 7, tzinfo=UTC)
CHUNK = 5000


def build_registry(root: Path, loops: int) -> tuple[Path, Path]:
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    template = {**schedules["reaper"], "enabled": True}
    (registry_dir / "schedules.json").write_text(json.dumps({f"loop-{i:06d}": template for i in range(loops)}))
    return registry_dir, config_dir


def fill_database(loops: int, history: int, stopped_every: int) -> None:
    """Per loop: ``history`` hourly ticks up to 21:00 (up to 18:00 for every ``stopped_every``-th
    loop), each planned PROPOSED with a pending proposal, and its state with ``next_due``."""
    from lib.instants import format_instant
    from runtime.models import Door, Event, PlanningOutcome, Proposal, ProposalStatus
    from runtime.registry import store
    from schedules.models import ScheduleState, SlotLoopStatus

    digest = store.current().digest
    hour = timedelta(hours=1)
    for first in range(0, loops, CHUNK):
        numbers = range(first, min(first + CHUNK, loops))
        last = {
            f"loop-{i:06d}": NOW.replace(minute=0) - (3 * hour if i % stopped_every == 0 else 0 * hour) for i in numbers
        }
        events = []
        for name, newest in last.items():
            for back in range(history - 1, -1, -1):
                slot = newest - back * hour
                uid = f"clock:{name}:{format_instant(slot)}"
                events.append(
                    Event(
                        uid=uid,
                        type="clock.tick.reaper",
                        source="schedule",
                        subject=name,
                        occurred_at=slot,
                        correlation_id=uid,
                        door=Door.SCHEDULE,
                        admitted_at=slot + timedelta(seconds=1),
                        payload={"loop": name, "slot": format_instant(slot), "cadenceSeconds": 3600, "skippedSlots": 0},
                        loop=name,
                        slot=slot,
                        planned_at=slot + timedelta(seconds=1),
                        planning_outcome=PlanningOutcome.PROPOSED,
                    )
                )
        Event.objects.bulk_create(events, batch_size=1000)
        Proposal.objects.bulk_create(
            [
                Proposal(
                    event_id=pk,
                    idempotency_key=f"{loop}:{format_instant(slot)}",
                    loop=loop,
                    catch_up="none",
                    singleton_key=loop,
                    definition="reaper@1",
                    status=ProposalStatus.PENDING,
                    plan={},
                    registry_digest=digest,
                    created_at=slot,
                )
                for pk, loop, slot in Event.objects.filter(loop__in=list(last)).values_list("pk", "loop", "slot")
            ],
            batch_size=1000,
        )
        ScheduleState.objects.bulk_create(
            [
                ScheduleState(
                    loop=name,
                    last_slot=newest,
                    last_event_id=f"clock:{name}:{format_instant(newest)}",
                    last_tick_at=newest + timedelta(seconds=1),
                    enabled=True,
                    enabled_since=newest - history * hour,
                    next_due=newest + hour,
                )
                for name, newest in last.items()
            ],
            batch_size=1000,
        )
    SlotLoopStatus.objects.create(name="slot-loop", last_iteration_at=NOW, pid=1, host="bench")


def measure(loops: int, history: int, stopped_every: int, repeat: int, database_url: str | None) -> None:
    root = make_root("schedules-bench-")
    registry_dir, config_dir = build_registry(root, loops)
    setup_django(
        {
            "DATABASE_URL": prepare_database(database_url, root),
            "FACTORY_REGISTRY_DIR": str(registry_dir),
            "FACTORY_CONFIG_DIR": str(config_dir),
            "FACTORY_API_TOKEN": TOKEN,
        }
    )
    from runtime.registry import store

    try:
        store.current()
        fill_database(loops, history, stopped_every)
        rows, stopped = run_reads(loops, repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    database = database_version()
    print(f"\n{loops:,} loops, {history} pending proposals each, {stopped:,} stopped; {database}\n")
    print(table(["read", "median ms", "min ms", "statements"], rows))
    print(machine_line(database))


def counting(statements: list[str]):
    """A database execute wrapper that appends each statement's SQL to ``statements``."""

    def wrapper(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    return wrapper


def run_reads(loops: int, repeat: int) -> tuple[list[list], int]:
    """Each read's median and minimum over ``repeat`` warm runs and its statements; the stopped loops."""
    from unittest import mock

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from ops.doctor import collect_status

    client = Client()
    staff = Client()
    staff.force_login(User.objects.create_user("bench", is_staff=True))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    last_page = -(-loops // 50)

    def command(*args):
        out = StringIO()
        call_command("schedule", *args, stdout=out)
        return out.getvalue()

    def ok(response):
        assert response.status_code == 200, response.content[:300]
        return response

    reads = [
        ("doctor (`collect_status`, serialised)", lambda: json.dumps(collect_status(now=NOW))),
        ("`GET /schedules?page=1` (50 loops)", lambda: ok(client.get("/schedules?page=1", headers=bearer))),
        (
            f"`GET /schedules?page={last_page}` (the last 50)",
            lambda: ok(client.get(f"/schedules?page={last_page}", headers=bearer)),
        ),
        ("`GET /schedules` (every loop)", lambda: ok(client.get("/schedules", headers=bearer))),
        ("`schedule list` (text)", lambda: command("list")),
        ("`schedule list --json` (every loop)", lambda: command("list", "--json")),
        ("`GET /dashboard/table/` (first page)", lambda: ok(staff.get("/dashboard/table/"))),
    ]
    rows = []
    with mock.patch("runtime.clock.database_now", lambda: NOW):
        stopped = len(collect_status(now=NOW)["stoppedSchedules"])
        for label, read in reads:
            read()  # warm
            statements: list[str] = []
            with connection.execute_wrapper(counting(statements)):
                read()
            samples = []
            for _ in range(repeat):
                start = time.perf_counter()
                read()
                samples.append((time.perf_counter() - start) * 1000)
            rows.append([label, f"{statistics.median(samples):,.1f}", f"{min(samples):,.1f}", len(statements)])
    return rows, stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--history", type=int, default=3, help="admitted ticks, each with a pending proposal, per loop")
    parser.add_argument("--stopped-every", type=int, default=100, help="one loop in this many is stopped")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--database-url",
        nargs="*",
        default=[],
        help="one throw-away PostgreSQL database per size (default: SQLite files)",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        measure(
            args.loops[0],
            args.history,
            args.stopped_every,
            args.repeat,
            args.database_url[0] if args.database_url else None,
        )
        return
    for i, loops in enumerate(args.loops):
        urls = ["--database-url", args.database_url[i]] if i < len(args.database_url) else []
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                "--loops",
                str(loops),
                "--history",
                str(args.history),
                "--stopped-every",
                str(args.stopped_every),
                "--repeat",
                str(args.repeat),
                *urls,
            ],
            check=True,
        )


if __name__ == "__main__":
    main()
