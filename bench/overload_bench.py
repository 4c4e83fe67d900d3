"""Benchmark: 4,000 loops every 5 s for a minute — is the planning backlog bounded, and is a tick's lateness independent of its loop's name?

Not a test. For each database (a temporary SQLite file; and the throw-away PostgreSQL
database ``--database-url`` names, dropped and created again), a child process builds a
registry of ``--loops`` interval loops every ``--every`` seconds (enabled watched copies of
``reaper``, named ``o-00000``…: each tick is planned into a proposal) and starts a real
``runserve`` on it (its slot loop's tick and planning threads, one gunicorn worker, and
``--run-workers`` run workers, default none: with workers, their preview threads dry-run the
reaper copies' newest proposals all the while, docs/design.md §8, Previews). Once the first slot's ticks are admitted it watches ``--seconds`` seconds,
counting the events left unplanned every half second, then stops ``runserve`` and reads the
ticks of the slots that started in the window. It reports:

- the ticks the window's slots should have had and those admitted, and the slots skipped
  (``skippedSlots`` of the ticks: a loop that missed a slot says so in its next tick);
- lateness — a tick's ``admitted_at`` (the database's clock) minus its slot start — its
  median, 99th percentile and largest, and the median of the loops named first (the first
  quarter in name order) and last (the last quarter): a burst admits in name order, so
  the two differ by the time a burst takes, which must stay well inside the cadence;
- the backlog (events unplanned) at its largest over the window and at its end, against
  the loops due in one slot: bounded means it never grows past a slot or two's ticks.

Issue 12's row: before the slot loop split ticks from planning, the backlog grew by 3,000
events an iteration without bound and loops late in name order ticked 4–12 s late.

    .venv/bin/python bench/overload_bench.py [--loops 4000] [--every 5] [--seconds 60] [--run-workers 0]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_overload] [--no-sqlite]
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

#: Bounds of the waits, in seconds: start-up and the first slot's ticks.
START_TIMEOUT = 600
#: Seconds between two counts of the backlog.
POLL_SECONDS = 0.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=4000, help="loops, all due in every slot (default 4,000)")
    parser.add_argument("--every", type=int, default=5, help="their cadence in seconds (default 5)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds watched (default 60)")
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped and recreated)")
    parser.add_argument("--no-sqlite", action="store_true", help="only the --database-url database")
    parser.add_argument("--run-workers", type=int, default=0,
                        help="run workers (default 0); each previews the newest watched proposals beside its runs")
    parser.add_argument("--one", choices=["sqlite", "postgresql"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.loops < 4 or args.every < 1 or args.seconds < 2 * args.every:
        parser.error("--loops must be at least 4, --every at least 1 and --seconds at least two cadences")
    if args.no_sqlite and not args.database_url:
        parser.error("--no-sqlite needs --database-url")
    return args


def percentile(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` of the sorted ``values`` (nearest rank). Pure."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def summarize(ticks: list[tuple[str, float, int]], *, loops: int, slots: int, backlog: list[int]) -> dict:
    """From the window's ticks ``(loop, lateness in seconds, skippedSlots)``, the ``slots``
    slot starts the window held and the backlog counts, the figures of the table. Pure."""
    names = sorted({f"o-{i:05d}" for i in range(loops)})
    quarter = len(names) // 4
    first, last = set(names[:quarter]), set(names[-quarter:])
    lateness = [late for _, late, _ in ticks]
    return {
        "expected": loops * slots,
        "admitted": len(ticks),
        "skipped": sum(skipped for _, _, skipped in ticks),
        "p50": statistics.median(lateness) if lateness else None,
        "p99": percentile(lateness, 0.99) if lateness else None,
        "max": max(lateness, default=None),
        "firstNames": statistics.median([late for loop, late, _ in ticks if loop in first] or [0.0]),
        "lastNames": statistics.median([late for loop, late, _ in ticks if loop in last] or [0.0]),
        "backlogMax": max(backlog, default=0),
        "backlogEnd": backlog[-1] if backlog else 0,
    }


def one(args: argparse.Namespace) -> dict:
    """One database: start runserve, wait for the first slot, watch the window, read its ticks."""
    from_url = args.database_url if args.one == "postgresql" else None
    root = bench_env.make_root("overload-bench-")
    registry_dir, config_dir = serve_env.watched_reaper_registry(root, args.loops, f"{args.every}s", "o")
    env, version = serve_env.prepare_runtime(root, from_url, registry_dir, config_dir)
    from runtime.models import Door, Event

    ticks = Event.objects.filter(door=Door.SCHEDULE)
    with open(root / "runserve.log", "w") as log:
        server = serve_env.start_runserve(env, port=serve_env.free_port(), log=log, run_workers=args.run_workers)
        try:
            serve_env.wait_until(lambda: ticks.count() >= args.loops, timeout=START_TIMEOUT,
                                 what="the first slot's ticks", processes=[server], every=0.5)
            began = datetime.now(UTC)
            backlog = []
            while (datetime.now(UTC) - began).total_seconds() < args.seconds:
                time.sleep(POLL_SECONDS)
                backlog.append(Event.objects.filter(planned_at__isnull=True).count())
            ended = datetime.now(UTC)
        finally:
            serve_env.stop_all([server])
    # The slots that started inside the window and at least one cadence before its end.
    epoch = int(began.timestamp()) // args.every * args.every + args.every
    starts = [datetime.fromtimestamp(s, UTC) for s in range(epoch, int(ended.timestamp()) - args.every, args.every)]
    rows = ticks.filter(slot__in=starts).values_list("loop", "slot", "admitted_at", "payload")
    window = [(loop, (admitted - slot).total_seconds(), payload.get("skippedSlots", 0))
              for loop, slot, admitted, payload in rows]
    return {"database": version, "loops": args.loops, "every": args.every, "slots": len(starts),
            "workers": args.run_workers, "previews": previews_ended(),
            **summarize(window, loops=args.loops, slots=len(starts), backlog=backlog)}


def previews_ended() -> int | None:
    """Previews that ended (done or failed) in the run; None for code without previews."""
    try:
        from runtime.preview_model import Preview
    except ImportError:
        return None
    return Preview.objects.filter(status__in=["done", "failed"]).count()


def _seconds(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def rows(results: list[dict]) -> list[list]:
    """The table's rows, one per database. Pure."""
    return [
        [
            r["database"], f"{r['loops']:,} every {r['every']} s", r["workers"],
            "—" if r["previews"] is None else f"{r['previews']:,}", r["slots"], f"{r['admitted']:,} / {r['expected']:,}",
            r["skipped"], _seconds(r["p50"]), _seconds(r["p99"]), _seconds(r["max"]),
            f"{_seconds(r['firstNames'])} / {_seconds(r['lastNames'])}", f"{r['backlogMax']:,} / {r['backlogEnd']:,}",
        ]
        for r in results
    ]


HEADERS = [
    "database", "loops", "run workers", "previews ended", "slots watched", "ticks admitted / due", "slots skipped", "lateness p50 s", "p99 s",
    "max s", "median, first / last quarter of names s", "backlog largest / at end",
]


def main() -> None:
    args = parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    results = []
    for database in ([] if args.no_sqlite else ["sqlite"]) + (["postgresql"] if args.database_url else []):
        argv = [sys.executable, __file__, "--one", database, "--loops", str(args.loops), "--every", str(args.every),
                "--seconds", str(args.seconds), "--run-workers", str(args.run_workers)]
        if args.database_url:
            argv += ["--database-url", args.database_url]
        results.append(bench_env.run_child(argv, timeout=START_TIMEOUT + args.seconds + 300, what=database))
    print(bench_env.table(HEADERS, rows(results)))
    print(bench_env.machine_line(", ".join(r["database"] for r in results)))
    bench_env.drop_database(args.database_url)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit("interrupted") from None
