"""Clock faults with real processes: a slot loop and a worker on a host whose clock is 90 s ahead, and
a clock stepped forward then back (docs/design.md §5, §11; docs/operations.md, "Clock faults").

Run on the suite's database kind: a SQLite file, or a PostgreSQL database of their own.
"""

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.attempts import attempts, install_probe, overlaps, queue_probe
from tests.conftest import STAND_INS_DIR
from tests.processes import MANAGE, PROJECT_DIR, free_port, stop, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db]

SKEW_SECONDS = 90
#: A loop every three seconds, watched (its ticks become proposals), and nothing else.
FAST = (
    "schedules:\n  heartbeat:\n    enabled: false\n"
    "  fast:\n    eventType: clock.tick.heartbeat\n    catchUp: none\n    singleton: true\n"
    "    enabled: true\n    every: 3s\n"
)
CADENCE = timedelta(seconds=3)


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def start_skewed(runtime, seconds: float, *args, **env) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, str(STAND_INS_DIR / "skewed_clock.py"), str(seconds), MANAGE, *args],
        env={**runtime.env, **env}, cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    runtime.processes.append(process)
    return process


def fast_ticks(runtime) -> list[dict]:
    events = runtime.listing("events")
    return sorted((e for e in events if e["eventId"].startswith("clock:fast:")), key=lambda e: e["payload"]["slot"])


def doctor(runtime) -> dict:
    return json.loads(runtime.manage("doctor", check=False).stdout)


def both_rows(runtime) -> dict | None:
    document = doctor(runtime)
    return document if len(document.get("processes", [])) == 2 else None


def test_a_slot_loop_whose_clock_is_90_s_ahead_fires_nothing_early_and_skips_no_slot(runtime):
    runtime.write_config("schedule.yaml", FAST)
    started = datetime.now(UTC)
    honest = runtime.start("slot_loop")
    skewed = start_skewed(runtime, SKEW_SECONDS, "slot_loop")
    try:
        wait_for(lambda: len(fast_ticks(runtime)) >= 5, timeout=40, what="five ticks of the fast loop")
        status = wait_for(lambda: both_rows(runtime), timeout=30, what="both slot loops' process rows")
    finally:
        outputs = [stop(honest), stop(skewed)]
    ended = datetime.now(UTC)
    assert all(code == 0 for code, _ in outputs), outputs

    ticks = fast_ticks(runtime)
    slots = [instant(t["payload"]["slot"]) for t in ticks]
    # Nothing early: every slot had come when its tick was admitted, on the one clock, which is this host's.
    for tick in ticks:
        admitted = instant(tick["admittedAt"])
        assert instant(tick["payload"]["slot"]) <= admitted, tick
        assert started - timedelta(seconds=1) <= admitted <= ended + timedelta(seconds=1), tick
    # No slot skipped, none fired twice.
    assert [t["payload"]["skippedSlots"] for t in ticks] == [0] * len(ticks)
    assert all(b - a == CADENCE for a, b in zip(slots, slots[1:], strict=False)), slots
    # Journal times in order, up to one transaction's length between two processes' commits.
    journal = sorted(runtime.listing("journal"), key=lambda entry: entry["id"])
    times = [instant(entry["at"]) for entry in journal]
    assert all(later >= earlier - timedelta(seconds=1) for earlier, later in zip(times, times[1:], strict=False))
    assert max(times) <= ended + timedelta(seconds=1)
    # Two loops waking on the same second never mistake each other's fresh slot for a clock step.
    assert [e for e in journal if e["action"] == "schedule_state_repaired"] == []

    rows = {p["pid"]: p for p in status["processes"]}
    assert {p["role"] for p in rows.values()} == {"slot-loop"}
    assert abs(rows[skewed.pid]["clockOffsetSeconds"] - SKEW_SECONDS) < 1.0
    assert abs(rows[honest.pid]["clockOffsetSeconds"]) < 1.0
    assert status["clockSkew"] == [rows[skewed.pid]]
    assert "clockSkew" in status["anomalies"]
    assert "skewed" not in outputs[0][1]
    assert f"is +{SKEW_SECONDS}" in outputs[1][1]  # the warning with the figure, in the skewed process's log


#: What a slot loop whose clock was a day ahead leaves behind, once the clock is corrected.
STEP_FORWARD = (
    "from datetime import datetime\n"
    "from runtime.clock import database_now\n"
    "from schedules.models import ScheduleState\n"
    "ScheduleState.objects.update_or_create(loop='fast', defaults={{'enabled': True, "
    "'last_slot': datetime.fromisoformat('{slot}'), 'enabled_since': database_now()}})\n"
)


def test_a_clock_stepped_forward_then_back_recovers_within_one_slot(runtime):
    runtime.write_config("schedule.yaml", FAST)
    future = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    future -= timedelta(seconds=future.timestamp() % 3)
    runtime.manage("shell", "-c", STEP_FORWARD.format(slot=future.isoformat()))
    future_text = future.strftime("%Y-%m-%dT%H:%M:%SZ")
    status = doctor(runtime)
    assert status["futureLastSlot"] == [{"loop": "fast", "key": None, "lastSlot": future_text}]
    assert "futureLastSlot" in status["anomalies"]

    loop = runtime.start("slot_loop")
    began = time.monotonic()
    try:
        first = wait_for(lambda: fast_ticks(runtime), timeout=20, what="the fast loop's first tick after the repair")[0]
        recovered_in = time.monotonic() - began
    finally:
        code, output = stop(loop)
    assert code == 0, output
    repairs = [e for e in runtime.listing("journal") if e["action"] == "schedule_state_repaired"]
    assert [(e["actor"], e["data"]["loop"], e["data"]["key"], e["data"]["futureSlot"]) for e in repairs] == [
        ("system", "fast", None, future_text),
    ]
    repaired = instant(repairs[0]["data"]["repairedSlot"])
    assert instant(first["payload"]["slot"]) == repaired + CADENCE
    assert first["payload"]["skippedSlots"] == 0
    # Within one slot of the repair (plus the process's start-up).
    assert instant(first["admittedAt"]) - instant(repairs[0]["at"]) <= CADENCE + timedelta(seconds=1)
    assert recovered_in < 20
    assert doctor(runtime)["futureLastSlot"] == []


def test_a_worker_whose_clock_is_90_s_ahead_steals_no_lease(runtime):
    """On its own clock the skewed worker would see the other's 6 s lease long expired and take
    the run back (a second attempt beside the first); on the database's it sees a live lease.
    (6 s, renewed every 2 s: a 3 s lease renewed every second once lapsed for real while two
    test suites shared the machine's two cores.)"""
    log = install_probe(runtime, mutating=False, seconds=8)
    run_id = queue_probe(runtime)
    fast = {"FACTORY_LEASE_SECONDS": "6", "FACTORY_STOP_GRACE_SECONDS": "1"}
    runtime.start("worker", **fast)
    wait_for(lambda: attempts(log), timeout=40, what="the probe's first attempt")
    start_skewed(runtime, SKEW_SECONDS, "worker", **fast)
    run = wait_for(
        lambda: next((r for r in runtime.listing("runs") if r["id"] == run_id and r["status"] == "succeeded"), None),
        timeout=40, what="the run to succeed", interval=0.5,
    )
    assert (run["attempt"], run["outcome"]) == (1, "DONE")
    found = attempts(log)
    assert len(found) == 1 and overlaps(found) == []
    actions = [e["action"] for e in reversed(runtime.listing("journal")) if e["runId"] == run_id]
    assert actions == ["run_queued", "run_claimed", "run_started", "run_succeeded"]


def test_runserve_s_http_worker_keeps_a_process_row(runtime):
    serve = runtime.start("runserve", "--bind", f"127.0.0.1:{free_port()}", "--http-workers", "1",
                          "--run-workers", "0", "--no-loop")
    try:
        rows = wait_for(lambda: [p for p in doctor(runtime).get("processes", []) if p["role"] == "http"],
                        timeout=40, what="the HTTP worker's process row")
    finally:
        code, output = stop(serve)
    assert code == 0, output
    assert len(rows) == 1 and rows[0]["pid"] != serve.pid and abs(rows[0]["clockOffsetSeconds"]) < 5
