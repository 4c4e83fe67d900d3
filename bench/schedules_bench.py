"""Benchmark: ``schedule list --json`` and ``GET /schedules`` with 10,000 loops.

Not a test. Builds a throw-away registry of N watched loops (copies of the reaper,
enabled), a throw-away SQLite database (or the empty database ``--database-url`` names,
which it migrates and fills), gives every loop ``--history`` admitted ticks with a
pending proposal each, then times:

- ``schedule list --json`` in this process, the registry already loaded (warm);
- ``GET /schedules`` through Django's test client with the API token (warm);
- ``manage.py schedule list --json`` as a new process (cold: interpreter, Django and a
  registry load of N loops included), once.

Prints the figures in milliseconds; the goal is under 300 ms for the warm answers.

    .venv/bin/python bench/schedules_bench.py [--loops 10000] [--history 3] [--repeat 5]
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
from io import StringIO
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
GOAL_MS = 300
TOKEN = "bench-token"
NOW = datetime(2026, 11, 30, 21, 7, tzinfo=UTC)


def build_registry(root: Path, loops: int) -> tuple[Path, Path]:
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    template = {**schedules["reaper"], "enabled": True}
    (registry_dir / "schedules.json").write_text(json.dumps({f"loop-{i:05d}": template for i in range(loops)}))
    return registry_dir, config_dir


def fill_database(loops: int, history: int) -> None:
    """Per loop: ``history`` hourly ticks, each planned PROPOSED with a pending proposal, and its state."""
    from lib.instants import format_instant
    from runtime.models import Door, Event, PlanningOutcome, Proposal, ProposalStatus
    from runtime.registry import get_registry
    from schedules.models import ScheduleState

    digest = get_registry().digest
    slots = [NOW.replace(minute=0) - timedelta(hours=history - 1 - h) for h in range(history)]
    for first in range(0, loops, 1000):
        names = [f"loop-{i:05d}" for i in range(first, min(first + 1000, loops))]
        events = []
        for name in names:
            for slot in slots:
                event_id = f"clock:{name}:{format_instant(slot)}"
                events.append(Event(
                    uid=event_id, type="clock.tick.reaper", source="schedule", subject=name,
                    occurred_at=slot, correlation_id=event_id, door=Door.SCHEDULE, admitted_at=slot,
                    payload={"loop": name, "slot": format_instant(slot), "cadenceSeconds": 3600, "skippedSlots": 0},
                    loop=name, slot=slot, planned_at=slot, planning_outcome=PlanningOutcome.PROPOSED,
                ))
        Event.objects.bulk_create(events)
        stored = Event.objects.filter(loop__in=names)
        Proposal.objects.bulk_create([
            Proposal(event=e, idempotency_key=f"{e.loop}:{format_instant(e.slot)}", loop=e.loop,
                     catch_up="none", singleton_key=e.loop, definition="reaper@1", status=ProposalStatus.PENDING,
                     plan={}, registry_digest=digest, created_at=e.admitted_at)
            for e in stored
        ])
        ScheduleState.objects.bulk_create([
            ScheduleState(loop=name, last_slot=slots[-1], last_event_id=f"clock:{name}:{format_instant(slots[-1])}",
                          last_tick_at=slots[-1], enabled=True, enabled_since=slots[0])
            for name in names
        ])


def timed(function, repeat: int) -> list[float]:
    result = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        result.append((time.perf_counter() - start) * 1000)
    return result


def report(label: str, samples: list[float]) -> None:
    median = statistics.median(samples)
    verdict = "ok" if median < GOAL_MS else f"OVER the {GOAL_MS} ms goal"
    print(f"{label:<44} median {median:8.1f} ms  min {min(samples):8.1f} ms  ({len(samples)} runs; {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=3, help="admitted ticks per loop")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database-url", help="an empty database to migrate and fill (default: a temporary SQLite file)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="schedules-bench-"))
    registry_dir, config_dir = build_registry(root, args.loops)
    os.environ.update({
        "DATABASE_URL": args.database_url or f"sqlite:///{root / 'bench.sqlite3'}",
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_API_TOKEN": TOKEN,
        "FACTORY_LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "factory_site.settings",
    })
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from runtime.registry import get_registry

    try:
        call_command("migrate", verbosity=0)
        start = time.perf_counter()
        get_registry()
        load_ms = (time.perf_counter() - start) * 1000
        fill_database(args.loops, args.history)
        print(f"{args.loops} loops, {args.history} ticks and pending proposals each; "
              f"database {os.environ['DATABASE_URL'].split(':')[0]}; registry load {load_ms:.0f} ms")

        def list_json() -> str:
            out = StringIO()
            call_command("schedule", "list", "--json", stdout=out)
            return out.getvalue()

        client = Client()

        def get_schedules():
            return client.get("/schedules", headers={"Authorization": f"Bearer {TOKEN}"})

        # Checked once, outside the timings: parsing the answer is the client's cost.
        assert len(json.loads(list_json())) == args.loops
        response = get_schedules()
        assert response.status_code == 200 and len(response.json()) == args.loops

        report("schedule list --json (in process, warm)", timed(list_json, args.repeat))
        report("GET /schedules (test client, warm)", timed(get_schedules, args.repeat))
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, str(BASE_DIR / "manage.py"), "schedule", "list", "--json"],
            check=True, stdout=subprocess.DEVNULL, env=os.environ.copy(),
        )
        cold = (time.perf_counter() - start) * 1000
        print(f"{'manage.py schedule list --json (new process)':<44} {cold:8.1f} ms  "
              "(interpreter, Django and the registry load included; not held to the goal)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
