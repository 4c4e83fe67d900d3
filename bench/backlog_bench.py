"""Benchmark: the burst while 50,000 events wait to be planned — how late the slot's last tick is admitted.

Not a test. For each database (a temporary SQLite file; and the throw-away PostgreSQL
database ``--database-url`` names, dropped and created again), a child process builds a
registry of ``--loops`` one-minute interval loops (enabled watched copies of ``reaper``)
and starts a real ``runserve`` on it (its slot loop: the tick thread and the planning
thread, as deployed; one gunicorn worker on a free loopback port, no run workers). The
loops are new, so its first iteration fires their current slot; once those ticks are
admitted and planned, the measured slot S is the next minute boundary at least ``--lead``
seconds away. From S − ``--lead`` this process admits ``--backlog`` events through the
inject door (``admit_batch`` in chunks of 1,000, one transaction each; per-envelope
validation skipped — the planner validates each event's input anyway) and tops the
backlog up — ``--backlog`` unplanned events, plus what the planner will drain before S at
the rate it shows — no chunk begun later than 1.5 s before S; then it stops writing.
From S it counts the slot's ticks every 50 ms until every one is admitted (at most
120 s), the backlog only at S, then and ``--after`` seconds later (counting 50,000 rows 20
times a second would load the database it measures), and reports:

- ``admitted_at − S``: the last tick's ``admitted_at`` (the database's clock) minus the
  slot start: issue 12's figure;
- ``visible − S``: when this process first saw every tick of S committed (host clock,
  the database on the same host; to the 50 ms poll), minus S — a burst's ticks are all
  stamped with the instant its iteration began, so only this says when the last one landed;
- the backlog at S and when the last tick was seen, and the events planned per second
  between the two (during the burst) and over the ``--after`` seconds after it.

The goal (issue 12, item 4): every due tick admitted within 1 s of the slot start.

    .venv/bin/python bench/backlog_bench.py [--backlog 50000] [--loops 10000] [--lead 30] [--after 10]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_backlog] [--no-sqlite]
"""

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402
import serve_env  # noqa: E402

#: Backlog events admitted per transaction: small enough that the last chunk, begun at
#: most ``QUIET_SECONDS`` before the slot, commits before it even on a loaded PostgreSQL
#: (5,000 took 2.5 s there at load 6 and overlapped the burst).
CHUNK = 1000
#: Seconds between two looks at the database once the slot has started.
POLL_SECONDS = 0.05
#: This process stops writing this many seconds before the slot starts.
QUIET_SECONDS = 1.5
#: Bounds of the waits, in seconds: start-up and the first slot's planning; the slot's ticks.
START_TIMEOUT, BURST_TIMEOUT = 900, 120


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=50_000, help="events waiting to be planned at the slot start")
    parser.add_argument("--loops", type=int, default=10_000, help="one-minute loops due at the slot start")
    parser.add_argument(
        "--lead",
        type=float,
        default=30.0,
        help="seconds before the slot start when the backlog is admitted (default 30)",
    )
    parser.add_argument("--after", type=float, default=10.0, help="seconds watched after the last tick (default 10)")
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped and recreated)")
    parser.add_argument("--no-sqlite", action="store_true", help="only the --database-url database")
    parser.add_argument("--one", choices=["sqlite", "postgresql"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.backlog < 0 or args.loops < 1 or args.lead <= QUIET_SECONDS or args.after < 0:
        parser.error(f"--backlog must be at least 0, --loops at least 1, --lead over {QUIET_SECONDS} s")
    if args.no_sqlite and not args.database_url:
        parser.error("--no-sqlite needs --database-url")
    return args


def next_slot(now: datetime, lead: float) -> datetime:
    """The first minute boundary at least ``lead`` seconds after ``now`` (UTC). Pure."""
    slot = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while (slot - now).total_seconds() < lead:
        slot += timedelta(minutes=1)
    return slot


def summarize(polls: list[tuple[float, int, int]], *, loops: int, slot_start: float) -> dict:
    """From the polls ``(unix instant, ticks of the slot seen, backlog left unplanned)``, the
    first taken at or after ``slot_start``: when every tick was first seen (seconds after
    the slot start, None if never), the backlog at the start and then, and events planned
    per second during the burst and after it. Pure."""
    first = polls[0]
    seen = next((p for p in polls if p[1] >= loops), None)
    last = polls[-1]

    def rate(a, b):
        return (a[2] - b[2]) / (b[0] - a[0]) if b[0] > a[0] else None

    return {
        "visible": None if seen is None else seen[0] - slot_start,
        "backlogAtStart": first[2],
        "backlogAtLastTick": None if seen is None else seen[2],
        "plannedPerSecondDuring": None if seen is None else rate(first, seen),
        "plannedPerSecondAfter": None if seen is None else rate(seen, last),
        "ticksSeen": max(p[1] for p in polls),
    }


def top_up(backlog: int, left: int, rate: float, seconds_to_start: float) -> int:
    """How many events to admit now so that about ``backlog`` are still unplanned at the slot
    start, with ``left`` unplanned now, planned at ``rate`` a second, and the last top-up
    at most ``QUIET_SECONDS`` and one 0.2 s look before the start. Pure."""
    drained = max(0.0, rate) * min(seconds_to_start, QUIET_SECONDS + 0.2)
    return max(0, round(backlog + drained) - left)


class Backlog:
    """Backlog events admitted through the inject door, numbered on from 0."""

    def __init__(self):
        self.admitted = 0

    def admit(self, count: int, *, until: float) -> None:
        """Admit ``count`` more, one chunk at a time, none begun after ``until`` (a unix instant)."""
        from django.db import transaction

        from runtime import clock
        from runtime.models import Door
        from runtime.registry import get_registry
        from runtime.services.admission import admit_batch

        while count > 0 and time.time() < until:
            size = min(CHUNK, count)
            now = clock.database_now()
            slot = now.strftime("%Y-%m-%dT%H:%M:%SZ")
            envelopes = [
                {
                    "schemaVersion": "factory.event/v1",
                    "eventId": f"backlog-{n}",
                    "type": "clock.tick.reaper",
                    "source": "operator",
                    "subject": "reaper",
                    "occurredAt": slot,
                    "correlationId": f"backlog-{n}",
                    "payload": {"loop": "reaper", "slot": slot, "cadenceSeconds": 3600, "skippedSlots": 0},
                }
                for n in range(self.admitted, self.admitted + size)
            ]
            with transaction.atomic():
                admit_batch(envelopes, door=Door.INJECT, now=now, registry=get_registry(), validate=False)
            self.admitted += size
            count -= size


def waiting() -> int:
    """The backlog left: unplanned events of the inject door (the backlog's door)."""
    from runtime.models import Door, Event

    return Event.objects.filter(planned_at__isnull=True, door=Door.INJECT).count()


def one(args: argparse.Namespace) -> dict:
    """One database: start runserve, wait for the first slot, build the backlog, watch slot S."""
    from_url = args.database_url if args.one == "postgresql" else None
    root = bench_env.make_root("backlog-bench-")
    registry_dir, config_dir = serve_env.watched_reaper_registry(root, args.loops, "1m", "b")
    env, version = serve_env.prepare_runtime(root, from_url, registry_dir, config_dir)
    from django.db.models import Max, Min

    from runtime.models import Door, Event

    ticks = Event.objects.filter(door=Door.SCHEDULE)
    with open(root / "runserve.log", "w") as log:
        server = serve_env.start_runserve(env, port=serve_env.free_port(), log=log, run_workers=0)
        try:
            serve_env.wait_until(
                lambda: ticks.count() >= args.loops and not Event.objects.filter(planned_at__isnull=True).exists(),
                timeout=START_TIMEOUT,
                what="first slot admitted and planned",
                processes=[server],
                every=0.5,
            )
            slot = next_slot(datetime.now(UTC), args.lead)
            start = slot.timestamp()
            time.sleep(max(0.0, start - args.lead - time.time()))
            backlog = Backlog()
            backlog.admit(args.backlog, until=start - QUIET_SECONDS)
            seen = (time.time(), waiting(), backlog.admitted)
            while time.time() < start - QUIET_SECONDS:
                time.sleep(0.2)
                now, left = time.time(), waiting()
                rate = (seen[1] + backlog.admitted - seen[2] - left) / (now - seen[0])
                backlog.admit(top_up(args.backlog, left, rate, start - now), until=start - QUIET_SECONDS)
                seen = (now, left, backlog.admitted)
            newest = Event.objects.aggregate(newest=Max("id"))["newest"] or 0
            time.sleep(max(0.0, start - time.time()))
            # Only rows after the backlog's: a cheap count on the primary key, 20 times a second.
            of_slot = ticks.filter(id__gt=newest, slot=slot)
            polls = [(time.time(), of_slot.count(), waiting())]
            while polls[-1][1] < args.loops and time.time() < start + BURST_TIMEOUT:
                time.sleep(POLL_SECONDS)
                seen = of_slot.count()
                if seen >= args.loops:
                    polls.append((time.time(), seen, waiting()))
            if polls[-1][1] >= args.loops:
                time.sleep(args.after)
            polls.append((time.time(), of_slot.count(), waiting()))
            admitted = of_slot.aggregate(first=Min("admitted_at"), last=Max("admitted_at"))
        finally:
            serve_env.stop_all([server])
    result = summarize(polls, loops=args.loops, slot_start=start)
    return {
        "database": version,
        "loops": args.loops,
        "backlog": args.backlog,
        "backlogAdmitted": backlog.admitted,
        "firstAdmittedLate": (admitted["first"] - slot).total_seconds() if admitted["first"] else None,
        "lastAdmittedLate": (admitted["last"] - slot).total_seconds() if admitted["last"] else None,
        **result,
    }


def _seconds(value) -> str:
    return "never" if value is None else f"{value:.2f}"


def _count(value) -> str:
    return "—" if value is None else f"{value:,.0f}"


def rows(results: list[dict]) -> list[list]:
    """The table's rows, one per database. Pure."""
    return [
        [
            r["database"],
            f"{r['loops']:,}",
            _count(r["backlogAtStart"]),
            f"{r['ticksSeen']:,}",
            _seconds(r["lastAdmittedLate"]),
            _seconds(r["visible"]),
            _count(r["backlogAtLastTick"]),
            _count(r["plannedPerSecondDuring"]),
            _count(r["plannedPerSecondAfter"]),
            "met" if r["visible"] is not None and r["visible"] <= 1.0 else "missed",
        ]
        for r in results
    ]


HEADERS = [
    "database",
    "loops",
    "backlog at S",
    "ticks of S",
    "last admitted_at − S s",
    "last visible − S s",
    "backlog then",
    "planned/s during burst",
    "planned/s after",
    "≤ 1 s",
]


def main() -> None:
    args = parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    results = []
    for database in ([] if args.no_sqlite else ["sqlite"]) + (["postgresql"] if args.database_url else []):
        argv = [
            sys.executable,
            __file__,
            "--one",
            database,
            "--backlog",
            str(args.backlog),
            "--loops",
            str(args.loops),
            "--lead",
            str(args.lead),
            "--after",
            str(args.after),
        ]
        if args.database_url:
            argv += ["--database-url", args.database_url]
        results.append(bench_env.run_child(argv, timeout=START_TIMEOUT + 300, what=database))
    print(bench_env.table(HEADERS, rows(results)))
    print(bench_env.machine_line(", ".join(r["database"] for r in results)))
    bench_env.drop_database(args.database_url)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # The child (and so its runserve processes, which die with it) is stopped already.
        raise SystemExit("interrupted") from None
