"""Benchmark: one slot-loop iteration with 1,000 due keyed rows among 10,000 and among 100,000 (docs/design.md §6 wants it flat).

Not a test. Builds a throw-away registry with two keyed loops (copies of the worked
example ``customer-digest``) and a throw-away SQLite database (or the empty database
``--database-url`` names, which it migrates and fills). ``small`` holds ``--small``
rows and ``large`` ``--large`` rows; in each, ``--due`` rows fall due at the measured
instant and the rest later. One loop at a time is enabled, and one iteration
(``ops.slot_loop.iterate``: registry check, keyed events, due rows, ticks,
planning) is timed at an instant just after the due slot, ``--repeat`` times, each with
a fresh set of due rows (``once`` rows, deleted when they fire). The work should follow
the due rows, not all rows: the two medians should be within 20% of each other.

    .venv/bin/python bench/keyed_bench.py [--small 10000] [--large 100000] [--due 1000] [--repeat 3]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
#: The two medians may differ by this much (docs/design.md §6 wants it flat).
TOLERANCE = 0.20


def build_registry(root: Path) -> tuple[Path, Path]:
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    example = schedules["customer-digest"]
    (registry_dir / "schedules.json").write_text(json.dumps({"small": example, "large": example}))
    return registry_dir, config_dir


def enable(config_dir: Path, loop: str) -> None:
    (config_dir / "schedule.yaml").write_text(f"schedules:\n  {loop}:\n    enabled: true\n")


def fill(loop: str, rows: int, due: int, repeat: int) -> None:
    """``due`` once-rows due at each measured instant, the other rows daily at 09:00 Budapest, due next year."""
    from schedules.models import KeyedSchedule, ScheduleState

    recorded = NOW - timedelta(days=1)
    ScheduleState.objects.create(loop=loop, enabled=True, enabled_since=recorded - timedelta(days=1))
    batch = []
    for i in range(rows):
        round_, index = divmod(i, due)
        if round_ < repeat:
            batch.append(KeyedSchedule(loop=loop, key=f"due-{round_}-{index:05d}", rule="once",
                                       next_due=NOW + timedelta(days=round_), set_by=f"bench-{i}", recorded_at=recorded))
        else:
            batch.append(KeyedSchedule(loop=loop, key=f"later-{i:06d}", rule="at", at="09:00", timezone="Europe/Budapest",
                                       next_due=datetime(2027, 6, 1, 7, 0, tzinfo=UTC), set_by=f"bench-{i}",
                                       recorded_at=recorded))
        if len(batch) == 5000:
            KeyedSchedule.objects.bulk_create(batch)
            batch = []
    KeyedSchedule.objects.bulk_create(batch)


def measure(config_dir: Path, loop: str, due: int, repeat: int) -> list[float]:
    from ops.slot_loop import iterate
    from runtime.models import Event
    from runtime.registry import store

    enable(config_dir, loop)
    store.reset()
    store.current()
    samples = []
    for round_ in range(repeat):
        now = NOW + timedelta(days=round_, seconds=1)
        start = time.perf_counter()
        report = iterate(now=now, record_status=False)
        samples.append((time.perf_counter() - start) * 1000)
        assert len(report.ticks) == due, (loop, len(report.ticks))
    assert Event.objects.filter(loop=loop).count() == due * repeat
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database-url", help="an empty database to migrate and fill (default: a temporary SQLite file)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="keyed-bench-"))
    registry_dir, config_dir = build_registry(root)
    os.environ.update({
        "DATABASE_URL": args.database_url or f"sqlite:///{root / 'bench.sqlite3'}",
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_LOG_LEVEL": "ERROR",
        "DJANGO_SETTINGS_MODULE": "factory_site.settings",
    })
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        fill("small", args.small, args.due, args.repeat)
        fill("large", args.large, args.due, args.repeat)
        print(f"database {os.environ['DATABASE_URL'].split(':')[0]}; {args.due} due rows per iteration")
        medians = {}
        for loop, rows in (("small", args.small), ("large", args.large)):
            samples = measure(config_dir, loop, args.due, args.repeat)
            medians[loop] = statistics.median(samples)
            print(f"{args.due} due of {rows:>7} rows: iteration median {medians[loop]:8.1f} ms  "
                  f"(runs: {', '.join(f'{s:.0f}' for s in samples)} ms)")
        ratio = medians["large"] / medians["small"]
        verdict = "ok" if abs(ratio - 1) <= TOLERANCE else f"OUTSIDE {TOLERANCE:.0%}"
        print(f"large / small = {ratio:.2f} ({verdict})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
