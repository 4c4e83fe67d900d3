"""A preview's command dies with its worker, and the preview is shown failed (docs/design.md §8, Previews).

A real ``worker`` process runs the preview of a watched, mutating probe (``tests.attempts``)
whose preview is its own command without ``--apply``; the probe logs its pid when it starts
and when it ends."""

import json
import signal
import time

import pytest

from tests.attempts import PROBE, alive, attempts
from tests.processes import stop, wait_for

pytestmark = pytest.mark.process


def watched_probe_with_preview(runtime, seconds: float) -> tuple:
    """``probe@1`` mutating, watched, previewed by dropping ``--apply`` (3 s preview time-out);
    one proposal of it pending. Returns the probe's log and the proposal's id."""
    log = runtime.root / "attempts.log"
    runtime.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n")
    (runtime.registry_dir / "definitions" / "probe@1.json").write_text(json.dumps({
        "id": "probe", "version": 1, "adapter": "command",
        "command": ["{python}", "-c", PROBE, str(log), str(seconds), "--apply"],
        "output_contract": "factory.command-result/v1", "mutating": True, "timeoutSeconds": 600, "maxAttempts": 1,
        "preview": {"drop": ["--apply"]}, "previewTimeoutSeconds": 3,
    }))
    runtime.update_registry("event-types.json",
                            lambda types: types.__setitem__("probe.requested", {"target": "probe@1"}))
    event = runtime.root / "probe-1.json"
    event.write_text(json.dumps({
        "schemaVersion": "factory.event/v1", "eventId": "probe-1", "type": "probe.requested", "source": "operator",
        "subject": "probe", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": "probe-1", "payload": {},
    }))
    runtime.manage("inject", str(event))
    runtime.manage("slot_loop", "--once")
    proposal = runtime.listing("proposals")[0]
    assert (proposal["status"], proposal["preview"]["status"]) == ("pending", "pending")
    return log, proposal["id"]


def preview_of(runtime, proposal_id: int) -> dict:
    return next(p for p in runtime.listing("proposals") if p["id"] == proposal_id)["preview"]


def test_a_stopped_worker_kills_its_preview_at_once_and_the_preview_is_failed(runtime):
    log, proposal_id = watched_probe_with_preview(runtime, seconds=30)
    worker = runtime.start("worker", FACTORY_STOP_GRACE_SECONDS="20")
    started = wait_for(lambda: attempts(log), timeout=30, what="the preview's command to start")[0]
    stopped_at = time.monotonic()
    code, output = stop(worker, timeout=20)
    assert code == 0, output
    assert time.monotonic() - stopped_at < 10  # a preview is advice: not given the run's 20 s grace
    assert not alive(started["pid"])
    preview = preview_of(runtime, proposal_id)
    assert (preview["status"], preview["reason"]) == ("failed", "worker_stopped")
    assert runtime.listing("runs") == []


def test_a_sigkilled_worker_takes_its_preview_along_and_the_preview_is_failed_past_its_deadline(runtime):
    log, proposal_id = watched_probe_with_preview(runtime, seconds=30)
    worker = runtime.start("worker")
    started = wait_for(lambda: attempts(log), timeout=30, what="the preview's command to start")[0]
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    wait_for(lambda: not alive(started["pid"]), timeout=10, what="the preview's command to die with its worker")
    assert preview_of(runtime, proposal_id)["status"] == "running"
    # Its deadline is its 3 s time-out and 15 s of kill grace after it started; the next claim records it failed.
    time.sleep(max(0.0, started["start"] + 19 - time.time()))
    runtime.manage("worker", "--once")
    preview = preview_of(runtime, proposal_id)
    assert (preview["status"], preview["reason"]) == ("failed", "worker_lost")
