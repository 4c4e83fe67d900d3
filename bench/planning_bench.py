"""Benchmark: N ticks due in one slot, admitted, then planned — time until the last event is planned.

Not a test. For each ``--events`` count and each database (SQLite, and PostgreSQL when
``--database-url`` names a throw-away database, which is dropped and created again), a
child process builds a registry of N interval loops due now — half watched copies of
``reaper`` (each tick becomes a pending proposal), half auto copies of ``heartbeat``
(each tick becomes an approved proposal and a queued run) — admits their ticks with the
slot loop's own ``schedules.ticks.emit_due_ticks``, then plans them with ``--planners``
planner processes (``runtime.services.planning.plan_pending`` until nothing is left)
and reports:

- ``admit s``: admitting the N ticks (the tick side's figure, for context);
- ``plan s``: from the first planner's start to the last event planned;
- ``events/s``, ``statements/event`` and ``statements/chunk`` (the planners' SQL statements
  over N and over the chunks of ``planning_batch.CHUNK_SIZE`` events);
- the SQLite plan of the singleton check (``EXPLAIN QUERY PLAN``), which must use the
  partial index ``run_one_active_per_singleton``, not scan the runs table.

    .venv/bin/python bench/planning_bench.py [--events 1000 10000] [--planners 1]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_planning]
"""

import argparse
import gc
import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402


def plan_all(ready, go, result) -> None:
    """One planner process: plan until nothing is left; report its statements and end time."""
    from django.db import connection

    from runtime import clock
    from runtime.registry import get_registry
    from runtime.services.planning import plan_pending

    registry = get_registry()
    statements = 0

    def count(execute, sql, params, many, context):
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    connection.close()
    gc.freeze()  # as `manage.py slot_loop`, whose thread plans, does once its registry is loaded
    ready.set()
    go.wait()
    with connection.execute_wrapper(count):
        while plan_pending(now=clock.database_now(), registry=registry):
            pass
    result.put((time.time(), statements))


def singleton_query_plan() -> str:
    """SQLite's plan for the singleton check the planner runs, as the planner runs it."""
    from django.db import connection

    try:
        from runtime.services.planning import singleton_in_flight_query
    except ImportError:  # the one-at-a-time planner's check, as its ORM query wrote it
        from runtime.models import ACTIVE_RUN_STATUSES, Run

        query = Run.objects.filter(singleton_key="w-00000", status__in=ACTIVE_RUN_STATUSES).values("id")[:1].query
        sql, params = query.sql_with_params()
    else:
        sql, params = singleton_in_flight_query(["w-00000"])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "; ".join(row[-1] for row in cursor.fetchall())


def one(events: int, database_url: str | None, planners: int) -> dict:
    root = bench_env.make_root("planning-bench-")
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=events // 2, auto=events - events // 2)
    url = bench_env.prepare_database(database_url, root)
    bench_env.setup_django({"DATABASE_URL": url, "FACTORY_REGISTRY_DIR": str(registry_dir),
                            "FACTORY_CONFIG_DIR": str(config_dir), "FACTORY_RUNS_DIR": str(root / "runs")})
    from django.db import connection

    from runtime import clock
    from runtime.models import Event
    from runtime.registry import get_registry
    from runtime.services.planning_batch import CHUNK_SIZE
    from schedules.ticks import emit_due_ticks

    registry = get_registry()
    start = time.perf_counter()
    emit_due_ticks(now=clock.database_now(), registry=registry)
    admit = time.perf_counter() - start
    admitted = Event.objects.count()
    query_plan = singleton_query_plan() if connection.vendor == "sqlite" else ""
    version = bench_env.database_version()
    connection.close()

    context = multiprocessing.get_context("fork")
    go, result = context.Event(), context.Queue()
    readies = [context.Event() for _ in range(planners)]
    processes = [context.Process(target=plan_all, args=(r, go, result)) for r in readies]
    for process in processes:
        process.start()
    for ready in readies:
        ready.wait()
    began = time.time()
    go.set()
    finished = [result.get() for _ in processes]
    for process in processes:
        process.join()
    plan = max(end for end, _ in finished) - began
    statements = sum(n for _, n in finished)
    unplanned = Event.objects.filter(planned_at__isnull=True).count()
    return {
        "events": admitted, "database": version, "admit": admit, "plan": plan, "planners": planners,
        "statements": statements, "chunk": CHUNK_SIZE, "unplanned": unplanned, "queryPlan": query_plan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--planners", type=int, default=1)
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped and recreated)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.db or None, args.planners)))
        return
    rows, plans, databases = [], set(), set()
    for database_url in [None] + ([args.database_url] if args.database_url else []):
        for events in args.events:
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(events), "--db", database_url or "",
                 "--planners", str(args.planners)],
                check=True, capture_output=True, text=True,
            ).stdout
            row = json.loads(out.strip().splitlines()[-1])
            databases.add(row["database"])
            if row["queryPlan"]:
                plans.add(row["queryPlan"])
            rows.append([row["database"], row["events"], row["planners"], f"{row['admit']:.2f}", f"{row['plan']:.2f}",
                         f"{row['events'] / row['plan']:.0f}", f"{row['statements'] / max(row['events'], 1):.2f}",
                         f"{row['statements'] / max(-(-row['events'] // row['chunk']), 1):.1f}", row["unplanned"]])
    print(bench_env.table(
        ["database", "events", "planners", "admit s", "plan s (last planned)", "events/s", "statements/event",
         "statements/chunk", "left unplanned"], rows))
    for plan in sorted(plans):
        print(f"SQLite singleton check: {plan}")
    print(bench_env.machine_line(", ".join(sorted(databases))))
    bench_env.drop_database(args.database_url)


if __name__ == "__main__":
    main()
