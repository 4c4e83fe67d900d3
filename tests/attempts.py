"""Attempts that say when they ran: a probe command for fault tests and drills (docs/design.md §8).

The probe (no braces in it: the registry would read them as placeholders) appends ``start <pid> <unix time>`` when it starts and ``end <pid> <unix time>``
when it ends — after its sleep, or on SIGTERM (its keeper's first signal) — to a log
shared by every attempt of its run; ``overlaps`` then says whether two attempts ever
ran at once. The helpers install it as the definition ``probe@1`` in a
``tests.processes.ProcessRuntime`` and queue one run of it.
"""

import json
import os
from pathlib import Path

PROBE = """import json, os, signal, sys, time
log, seconds = sys.argv[1], float(sys.argv[2])
def line(word):
    with open(log, 'a') as out:
        out.write('%s %d %.3f\\n' % (word, os.getpid(), time.time()))
def stopped(signum, frame):
    line('end')
    sys.exit(143)
signal.signal(signal.SIGTERM, stopped)
line('start')
time.sleep(seconds)
line('end')
print(json.dumps(dict(schemaVersion='factory.command-result/v1', outcome='DONE')))
"""


def install_probe(runtime, *, mutating: bool, seconds: float, max_attempts: int = 3) -> Path:
    """Register ``probe@1`` (sleeping ``seconds``) and its event type ``probe.requested``
    (auto when not mutating, else watched) in ``runtime``; the heartbeat off. Returns the log's path."""
    log = runtime.root / "attempts.log"
    runtime.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n")
    (runtime.registry_dir / "definitions" / "probe@1.json").write_text(json.dumps({
        "id": "probe", "version": 1, "adapter": "command", "command": ["{python}", "-c", PROBE, str(log), str(seconds)],
        "output_contract": "factory.command-result/v1", "mutating": mutating, "timeoutSeconds": 600,
        "maxAttempts": max_attempts,
    }))
    approval = "watched" if mutating else "auto"
    runtime.update_registry(
        "event-types.json", lambda types: types.__setitem__("probe.requested", {"target": "probe@1", "approval": approval})
    )
    return log


def queue_probe(runtime, event_id: str = "probe-1") -> int:
    """Inject ``probe.requested``, plan it and (watched: as the operator) approve it; returns the run's id."""
    event = runtime.root / f"{event_id}.json"
    event.write_text(json.dumps({
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": "probe.requested", "source": "operator",
        "subject": "probe", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": event_id, "payload": {},
    }))
    injected = runtime.manage("inject", str(event), check=False)
    assert injected.returncode == 0, injected.stderr
    runtime.manage("slot_loop", "--once")
    proposal = runtime.listing("proposals")[0]
    if proposal["status"] == "pending":
        runtime.manage("ensure_operator")
        runtime.manage("approve", str(proposal["id"]), "--as", "operator")
    return runtime.listing("runs")[0]["id"]


def attempts(log: Path) -> list[dict]:
    """Each attempt in the log: ``{pid, start, end}`` (``end`` None while running or when lost), by start."""
    found: dict[int, dict] = {}
    text = log.read_text() if log.exists() else ""
    for line in text.splitlines():
        word, pid, instant = line.split()
        found.setdefault(int(pid), {"pid": int(pid), "start": None, "end": None})[word] = float(instant)
    return sorted(found.values(), key=lambda attempt: attempt["start"] or 0.0)


def overlaps(found: list[dict]) -> list[tuple[int, int]]:
    """Pairs of pids whose attempts ran at the same time; an attempt without an end overlaps every later one."""
    pairs = []
    for index, earlier in enumerate(found):
        for later in found[index + 1:]:
            if earlier["end"] is None or later["start"] < earlier["end"]:
                pairs.append((earlier["pid"], later["pid"]))
    return pairs


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rindex(")") + 2] != "Z"
