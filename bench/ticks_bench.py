"""Benchmark: N interval loops due in one slot (the burst) and one iteration with nothing due (idle).

Not a test. For each database and each N (``--loops``), a child process builds a
throw-away registry of N one-minute interval loops (copies of the heartbeat, enabled),
a fresh database (a temporary SQLite file, or a new PostgreSQL database created next to
the one ``--postgres-url`` names and dropped afterwards), migrates it and gives every
loop a ``ScheduleState`` whose last slot is the previous minute (brought in line with the
registry, as the previous iteration would have left it). Then, at 0.2 s into the next
minute:

- **burst**: one call of ``schedules.ticks.emit_due_ticks`` — every loop is due — timed
  until it returns, that is until the last tick is admitted and committed; every
  statement counted and named, so the round trips of a chunk of ticks can be read off;
- **idle**: the ticks marked planned (and, on PostgreSQL, the tables analysed, as
  autovacuum does within a minute of a burst), one whole slot-loop iteration
  (``ops.slot_loop.iterate``: registry check, ticks, outbox, planning, status row) a
  second later with nothing due, timed (median of ``--repeat``), its statements named.

The goals (issue 12): the burst of 10,000 in at most 1 s; the idle iteration the same
named statements from 100 to 100,000 loops, at most 1 ms. Prints one table and the
machine (nproc, load average, database and version).

    .venv/bin/python bench/ticks_bench.py [--loops 100,1000,10000,100000] [--databases sqlite,postgresql]
        [--postgres-url postgres://postgres@127.0.0.1:5432/postgres] [--repeat 5]
"""

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SLOT = datetime(2026, 11, 30, 21, 7, tzinfo=UTC)
BURST_AT = SLOT + timedelta(seconds=0.2)
IDLE_AT = SLOT + timedelta(seconds=1.2)
TABLE = re.compile(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', re.IGNORECASE)


def statement_name(sql: str) -> str:
    """``SELECT schedules_schedulestate``: the statement's verb and first table. Pure."""
    verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
    table = TABLE.search(sql)
    return f"{verb} {table.group(1)}" if table else verb


class StatementCounter:
    """A ``connection.execute_wrapper`` that counts statements by ``statement_name``."""

    def __init__(self):
        self.names = Counter()

    def __call__(self, execute, sql, params, many, context):
        self.names[statement_name(sql)] += 1
        return execute(sql, params, many, context)

    @property
    def total(self) -> int:
        return sum(self.names.values())


def build_registry(root: Path, loops: int) -> tuple[Path, Path]:
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    template = {**schedules["heartbeat"], "every": "1m", "enabled": True}
    (registry_dir / "schedules.json").write_text(json.dumps({f"loop-{i:06d}": template for i in range(loops)}))
    return registry_dir, config_dir


def database_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0].split()[0]}"
        cursor.execute("SELECT sqlite_version()")
        return f"SQLite {cursor.fetchone()[0]}"


def child(loops: int, database_url: str, repeat: int) -> dict:
    """Measure one N on one (empty) database; returns the figures."""
    root = Path(tempfile.mkdtemp(prefix="ticks-bench-"))
    registry_dir, config_dir = build_registry(root, loops)
    os.environ.update({
        "DATABASE_URL": database_url or f"sqlite:///{root / 'bench.sqlite3'}",
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_LOG_LEVEL": "INFO",  # the runtime's default: the figures include its log lines
        "DJANGO_SETTINGS_MODULE": "factory_site.settings",
    })
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from ops.slot_loop import iterate
    from runtime.models import Event, PlanningOutcome
    from runtime.registry import store
    from schedules.models import ScheduleState
    from schedules.state import ensure_synced
    from schedules.tick_rows import tick_forms
    from schedules.ticks import CHUNK, emit_due_ticks

    try:
        call_command("migrate", verbosity=0)
        start = time.perf_counter()
        registry = store.current()
        load_s = time.perf_counter() - start
        previous = SLOT - timedelta(minutes=1)
        ScheduleState.objects.bulk_create([
            ScheduleState(loop=name, last_slot=previous, last_event_id=f"clock:{name}:{previous:%Y-%m-%dT%H:%M:%SZ}",
                          last_tick_at=previous, enabled=True, enabled_since=previous - timedelta(hours=1))
            for name in registry.loops
        ], batch_size=5000)
        ensure_synced(registry, previous)  # as the iteration before this slot left them
        tick_forms(registry)  # as the slot loop's tick thread does when it adopts a registry
        gc.freeze()  # as `manage.py slot_loop` does once its registry is loaded


        burst = StatementCounter()
        with connection.execute_wrapper(burst):
            start = time.perf_counter()
            ticks = emit_due_ticks(now=BURST_AT, registry=registry)
            burst_s = time.perf_counter() - start
        admitted = sum(1 for tick in ticks if tick.admitted)
        stored = Event.objects.filter(loop__isnull=False).count()
        if admitted != loops or stored != loops:
            raise SystemExit(f"burst of {loops}: {admitted} admitted, {stored} stored")

        Event.objects.update(planned_at=BURST_AT, planning_outcome=PlanningOutcome.NOOP)
        if connection.vendor == "postgresql":
            # What autovacuum does within a minute of a burst: without statistics the
            # planner scans the states instead of reading the indexes the idle check uses.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        iterate(now=IDLE_AT)  # warm: the first idle iteration may create the status row
        samples = []
        for n in range(repeat):
            start = time.perf_counter()
            report = iterate(now=IDLE_AT + timedelta(milliseconds=n))
            samples.append(time.perf_counter() - start)
            if report.ticks or report.planned or report.published:
                raise SystemExit(f"idle iteration of {loops} did work: {report}")
        idle = StatementCounter()
        with connection.execute_wrapper(idle):
            iterate(now=IDLE_AT + timedelta(milliseconds=repeat))
        return {
            "loops": loops, "database": database_version(), "registryLoadSeconds": load_s,
            "burstSeconds": burst_s, "burstStatements": burst.total, "burstNames": dict(sorted(burst.names.items())),
            "chunks": -(-loops // CHUNK),
            "idleMilliseconds": statistics.median(samples) * 1000, "idleStatements": idle.total,
            "idleNames": dict(sorted(idle.names.items())),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def postgres_database(admin_url: str, name: str, *, create: bool) -> str:
    """Create (or drop) database ``name`` on the server of ``admin_url``; returns its URL."""
    import psycopg

    with psycopg.connect(admin_url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        # FORCE: a child stopped at its time limit may leave its session running a statement.
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def run_child(loops: int, database: str, args) -> dict:
    name = f"factory_ticks_bench_{os.getpid()}"
    url = postgres_database(args.postgres_url, name, create=True) if database == "postgresql" else ""
    try:
        argv = [sys.executable, __file__, "--child", str(loops), "--database-url", url, "--repeat", str(args.repeat)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{database} {loops}: child failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        if database == "postgresql":
            postgres_database(args.postgres_url, name, create=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="100,1000,10000,100000",
                        help="loop counts, comma-separated (default 100,1000,10000,100000)")
    parser.add_argument("--databases", default="sqlite,postgresql",
                        help="sqlite, postgresql or both, comma-separated (default both)")
    parser.add_argument("--postgres-url", default="postgres://postgres@127.0.0.1:5432/postgres",
                        help="an existing PostgreSQL database to connect to: each size gets a new database "
                             "created beside it and dropped afterwards (default the server's postgres)")
    parser.add_argument("--repeat", type=int, default=5, help="idle iterations measured, their median reported (default 5)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.database_url, args.repeat)))
        return

    results = []
    for database in args.databases.split(","):
        for loops in (int(n) for n in args.loops.split(",")):
            result = run_child(loops, database, args)
            results.append(result)
            print(f"  done: {result['database']}, {loops} loops", file=sys.stderr, flush=True)
    print(f"nproc {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = f"{'database':<18} {'loops':>7} {'burst s':>9} {'ms/tick':>8} {'stmts/tick':>10} {'idle ms':>9} {'idle stmts':>10} {'load s':>7}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['database']:<18} {r['loops']:>7} {r['burstSeconds']:>9.3f} {r['burstSeconds'] / r['loops'] * 1000:>8.3f} "
              f"{r['burstStatements'] / r['loops']:>10.2f} {r['idleMilliseconds']:>9.2f} {r['idleStatements']:>10} "
              f"{r['registryLoadSeconds']:>7.1f}")
    print("burst statements (each chunk of ticks: its events, their journal entries, its states' advance):")
    for r in results:
        names = ", ".join(f"{name} ×{count}" for name, count in r["burstNames"].items())
        print(f"  {r['database']}, {r['loops']} loops, {r['chunks']} chunks: {names}")
    print("idle iteration statements:")
    for r in results:
        names = ", ".join(f"{name} ×{count}" for name, count in r["idleNames"].items())
        print(f"  {r['database']}, {r['loops']} loops: {names}")


if __name__ == "__main__":
    main()
