"""Benchmark: planning and run-claim throughput with 1, 2 and 4 ``runserve`` processes on one PostgreSQL database.

Not a test. For each process count K (``--processes``) and each count W of run workers per
process (``--run-workers``), a child process recreates the
throw-away PostgreSQL database ``--database-url`` names (dropped and created again),
migrates it, and starts K ``runserve`` processes on it, each with its slot loop, one
gunicorn worker on a free loopback port and W run workers. The registry
is a copy of the kernel with no loops (nothing ticks meanwhile) and two bench-only event
types of one bench-only definition, ``bench-noop@1`` (``--adapter command``: a read-only
command, ``/bin/true``, run through the command adapter and its spawner like any command;
``--adapter builtin``: the heartbeat's health report, inside the worker):
``bench.plan.requested`` (watched) and ``bench.run.requested`` (``approval: auto``).
Once every slot loop and run worker has its process row:

- **planning** (skipped with ``--events 0``): ``--events`` injected ``bench.plan.requested`` events (each its own
  correlation, so planners may share them) are admitted in one transaction through the
  inject door (``admit_batch``, validated); from its commit, the K slot loops plan them
  (pending proposals); timed until the database shows none unplanned;
- **claims**: ``--runs`` injected ``bench.run.requested`` events are admitted and planned
  by this process in one transaction, so ``--runs`` queued runs appear at once at its
  commit; timed until the database shows every one finished, claimed and run by the
  K × W workers (``runtime.services.runs.claim_next_run``, the fair queue). A run's own
  time is its ``finished_at − claimed_at`` (the database's clock): what a quick command
  costs its worker.

Prints one row per (K, W) — events/s planned, runs/s finished, each as a ratio to the first
row, runs/s per worker and the median claim → finish in ms — and the machine line (nproc,
load average). Every ``runserve`` leads a process group of its own, stopped (SIGTERM,
then SIGKILL after 30 s) on every exit path, Ctrl-C included; every wait is bounded.

    .venv/bin/python bench/claims_bench.py --database-url postgres://postgres@127.0.0.1:5432/bench_claims
        [--processes 1 2 4] [--events 5000] [--runs 300] [--run-workers 1 [4]] [--adapter command|builtin]

**Statements per operation** (issue 29): after each row's processes stop, one run worker in
the bench's own process claims and finishes ``5`` queued runs one ``work_one`` each; a second
table prints the first row's statements and round trips: an idle ``work_one``, of a claim, a start, the
command's time and a finish (``bench/statements.py``; ``--no-statements`` skips it).

The quick-run figures of docs/performance.md (``/bin/true``, one process of 1 and of 4 workers)::

    … --processes 1 --run-workers 1 4 --events 0 --runs 600
"""

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402
import serve_env  # noqa: E402
import statements  # noqa: E402

#: ``bench-noop@1`` for each ``--adapter``: a command that does nothing, or the builtin health
#: report (the heartbeat's: a few queries inside the worker, no child process).
DEFINITIONS = {
    "command": {
        "adapter": "command",
        "command": ["/bin/true"],
        "captureStdout": "noop.log",
        "description": "claims_bench.py: a command that does nothing",
    },
    "builtin": {
        "adapter": "builtin",
        "builtin": "health",
        "captureStdout": "health.json",
        "description": "claims_bench.py: the health report, run inside the worker",
    },
}
PLAN_TYPE, RUN_TYPE = "bench.plan.requested", "bench.run.requested"
EVENT_TYPES = {
    PLAN_TYPE: {"target": "bench-noop@1", "description": "claims_bench.py: planned into a pending proposal"},
    RUN_TYPE: {
        "target": "bench-noop@1",
        "approval": "auto",
        "description": "claims_bench.py: planned into a queued run",
    },
}
#: Bounds of the waits, in seconds: the processes' start, each phase.
START_TIMEOUT, PHASE_TIMEOUT = 180, 900


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        required=True,
        help="a throw-away PostgreSQL database, dropped and created again for each process count",
    )
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4], help="runserve counts (default 1 2 4)")
    parser.add_argument("--events", type=int, default=5000, help="events to plan (default 5000; 0: no planning phase)")
    parser.add_argument("--runs", type=int, default=300, help="queued runs to claim and finish (default 300)")
    parser.add_argument(
        "--run-workers", type=int, nargs="+", default=[1], help="run workers per runserve, one row each (default 1)"
    )
    parser.add_argument(
        "--adapter",
        choices=sorted(DEFINITIONS),
        default="command",
        help="what a run executes: /bin/true through the command adapter (default), or the builtin health report",
    )
    parser.add_argument("--no-statements", dest="statements", action="store_false",
                        help="skip the count of statements per claim and finish (bench/statements.py)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("--database-url must be a postgres:// URL: the processes share one PostgreSQL database")
    if min(args.processes) < 1 or args.events < 0 or args.runs < 1 or min(args.run_workers) < 1:
        parser.error("--processes, --runs and --run-workers must be at least 1, --events at least 0")
    return args


def build_registry(root: Path, adapter: str) -> tuple[Path, Path]:
    """The kernel copy with no loops and the bench-only definition (``adapter``: a key of
    ``DEFINITIONS``) and event types."""
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=0, auto=0)
    definition = {
        "id": "bench-noop",
        "version": 1,
        **DEFINITIONS[adapter],
        "mutating": False,
        "output_contract": "factory.command-result/v1",
        "timeoutSeconds": 60,
        "maxAttempts": 1,
    }
    (registry_dir / "definitions" / "bench-noop@1.json").write_text(json.dumps(definition))
    types_path = registry_dir / "event-types.json"
    types_path.write_text(json.dumps({**json.loads(types_path.read_text()), **EVENT_TYPES}))
    return registry_dir, config_dir


def envelopes(kind: str, count: int, *, prefix: str) -> list[dict]:
    occurred = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return [
        {
            "schemaVersion": "factory.event/v1",
            "eventId": f"{prefix}-{n}",
            "type": kind,
            "source": "operator",
            "subject": "bench",
            "occurredAt": occurred,
            "correlationId": f"{prefix}-{n}",
            "payload": {"n": n},
        }
        for n in range(count)
    ]


def ready(processes: int, run_workers: int) -> bool:
    """Every slot loop and run worker has its process row."""
    from django.db.models import Count

    from ops.models import ProcessRecord

    roles = dict(ProcessRecord.objects.values_list("role").annotate(n=Count("id")))
    return roles.get("slot-loop", 0) >= processes and roles.get("worker", 0) >= processes * run_workers


def plan_phase(count: int, children) -> float:
    """Seconds from the commit of ``count`` admitted events to the last one planned."""
    from django.db import transaction

    from runtime import clock
    from runtime.models import Door, Event
    from runtime.registry import get_registry
    from runtime.services.admission import admit_batch

    batch = envelopes(PLAN_TYPE, count, prefix="plan")
    with transaction.atomic():
        admitted = admit_batch(batch, door=Door.INJECT, now=clock.database_now(), registry=get_registry())
    began = time.monotonic()
    if len(admitted.admitted) != count:
        raise SystemExit(f"admitted {len(admitted.admitted)} of {count} events: {admitted.refused}")
    serve_env.wait_until(
        lambda: not Event.objects.filter(planned_at__isnull=True).exists(),
        timeout=PHASE_TIMEOUT,
        what="event planned last",
        processes=children,
        every=0.05,
    )
    return time.monotonic() - began


def queue_runs(count: int, *, prefix: str) -> int:
    """Admit ``count`` ``bench.run.requested`` events and plan them into queued runs, in one
    transaction; returns how many runs are queued at its commit."""
    from django.db import transaction

    from runtime import clock
    from runtime.models import Door, Run, RunStatus
    from runtime.registry import get_registry
    from runtime.services.admission import admit_batch
    from runtime.services.planning import plan_pending

    registry = get_registry()
    with transaction.atomic():
        now = clock.database_now()
        admit_batch(envelopes(RUN_TYPE, count, prefix=prefix), door=Door.INJECT, now=now, registry=registry)
        plan_pending(now=now, limit=count, registry=registry)
        return Run.objects.filter(status=RunStatus.QUEUED).count()


def claim_phase(count: int, children) -> tuple[float, float, dict[str, int]]:
    """Seconds from the commit of ``count`` queued runs to the last one finished, the median
    seconds a run took from its claim to its finish, and the runs' final statuses."""
    from django.db.models import Count

    from runtime.models import Run, RunStatus

    queued = queue_runs(count, prefix="run")
    began = time.monotonic()
    if queued != count:
        raise SystemExit(f"{queued} runs queued of {count}")
    unfinished = (RunStatus.QUEUED, RunStatus.CLAIMED, RunStatus.RUNNING)
    serve_env.wait_until(
        lambda: not Run.objects.filter(status__in=unfinished).exists(),
        timeout=PHASE_TIMEOUT,
        what="run finished last",
        processes=children,
        every=0.05,
    )
    seconds = time.monotonic() - began
    spans = [(f - c).total_seconds() for c, f in Run.objects.values_list("claimed_at", "finished_at") if c and f]
    return seconds, statistics.median(spans), dict(Run.objects.values_list("status").annotate(n=Count("id")))


def one(args: argparse.Namespace) -> dict:
    """One process count and one count of run workers, on a fresh database: both phases' figures."""
    workers = args.run_workers[0]
    root = bench_env.make_root("claims-bench-")
    registry_dir, config_dir = build_registry(root, args.adapter)
    env, version = serve_env.prepare_runtime(root, args.database_url, registry_dir, config_dir)
    children = []
    with open(root / "runserve.log", "w") as log:
        try:
            for _ in range(args.one):
                children.append(
                    serve_env.start_runserve(env, port=serve_env.free_port(), log=log, run_workers=workers)
                )
            serve_env.wait_until(
                lambda: ready(args.one, workers),
                timeout=START_TIMEOUT,
                what="process row of every slot loop and run worker",
                processes=children,
            )
            time.sleep(2)  # past each slot loop's first iteration
            plan_seconds = plan_phase(args.events, children) if args.events else None
            claim_seconds, run_seconds, statuses = claim_phase(args.runs, children)
        finally:
            serve_env.stop_all(children)
    counted = statements.run_counts(lambda n: queue_runs(n, prefix="counted")) if args.statements else None
    return {
        "processes": args.one,
        "runWorkers": workers,
        "adapter": args.adapter,
        "database": version,
        "events": args.events,
        "planSeconds": plan_seconds,
        "runs": args.runs,
        "claimSeconds": claim_seconds,
        "runSeconds": run_seconds,
        "statuses": statuses,
        "statements": counted,
    }


def rows(results: list[dict]) -> list[list]:
    """The table's rows, one per result, ratios to the first result; "—" for planning
    not measured (``--events 0``). Pure."""
    base = results[0]
    base_plan = base["events"] / base["planSeconds"] if base["planSeconds"] else None
    base_claim = base["runs"] / base["claimSeconds"]
    table = []
    for r in results:
        workers = r["processes"] * r["runWorkers"]
        planned = r["events"] / r["planSeconds"] if r["planSeconds"] else None
        finished = r["runs"] / r["claimSeconds"]
        others = {k: v for k, v in sorted(r["statuses"].items()) if k != "succeeded"}
        table.append(
            [
                r["processes"],
                r["runWorkers"],
                r["events"],
                "—" if planned is None else f"{r['planSeconds']:.2f}",
                "—" if planned is None else f"{planned:.0f}",
                "—" if planned is None or base_plan is None else f"{planned / base_plan:.2f}",
                r["runs"],
                f"{r['claimSeconds']:.2f}",
                f"{finished:.1f}",
                f"{finished / base_claim:.2f}",
                f"{finished / workers:.1f}",
                f"{r['runSeconds'] * 1000:.1f}",
                " ".join(f"{k}:{v}" for k, v in others.items()) or "none",
            ]
        )
    return table


HEADERS = [
    "processes",
    "run workers each",
    "events",
    "plan s",
    "events/s planned",
    "× first",
    "runs",
    "runs s",
    "runs/s finished",
    "× first",
    "runs/s per worker",
    "median claim → finish ms",
    "runs not succeeded",
]


def main() -> None:
    args = parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    results = []
    for processes in args.processes:
        for workers in args.run_workers:
            argv = [
                sys.executable,
                __file__,
                "--one",
                str(processes),
                "--database-url",
                args.database_url,
                "--events",
                str(args.events),
                "--runs",
                str(args.runs),
                "--run-workers",
                str(workers),
                "--adapter",
                args.adapter,
                *([] if args.statements else ["--no-statements"]),
            ]
            results.append(
                bench_env.run_child(
                    argv, timeout=START_TIMEOUT + 3 * PHASE_TIMEOUT, what=f"{processes} processes of {workers} workers"
                )
            )
    print(bench_env.table(HEADERS, rows(results)))
    counted = next((r["statements"] for r in results if r.get("statements")), None)
    if counted:
        print(f"\nStatements per operation (bench/statements.py: one run worker in the bench's process, the adapter "
              f"{args.adapter}, once the runserve processes stopped):")
        print(bench_env.table(statements.DOOR_HEADERS, statements.run_rows(counted)))
    print(bench_env.machine_line(", ".join(sorted({r["database"] for r in results}))))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # The child (and so its runserve processes, which die with it) is stopped already.
        raise SystemExit("interrupted") from None
