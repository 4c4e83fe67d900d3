"""The doctor's document in words, for a person at a terminal (docs/design.md §11).

``doctor_lines`` is pure: the ``/status`` document (``ops.doctor.status_document``, or the
command's ``databaseUnavailable`` stand-in) and the instant it was read at give a first line,
``ok`` or ``N anomalies``, then one line per anomaly — per loop, run or process it names —
each starting with the dashboard's badge word where a loop's badge says it (``stopped:
heartbeat (…)``). ``N`` counts those lines.
"""

from datetime import datetime

from lib.instants import parse_instant
from runtime.admin.common import duration

from .web.badges import DOCTOR_BADGES

#: The words of the anomalies no loop badge names.
OTHER_WORDS = {
    "slotLoopStale": "slot loop not turning",
    "registryInvalid": "registry invalid",
    "clockSkew": "clock skew",
    "runBacklog": "run backlog",
    "databaseUnavailable": "database unavailable",
}
WORDS = {**dict(DOCTOR_BADGES), **OTHER_WORDS}


def _ago(instant: str | None, now: datetime) -> str:
    return f"{duration((now - parse_instant(instant)).total_seconds())} ago" if instant else ""


def _item(key: str, item: dict, now: datetime) -> str:
    """What one item of anomaly ``key`` says after its word."""
    if key == "stoppedSchedules":
        last = f"last tick {item['lastTickAt']}, {_ago(item['lastTickAt'], now)}" if item["lastTickAt"] else "never ticked"
        return f"{item['loop']} ({last}; expected by {item['expectedBy']})"
    if key == "proposalPileUps":
        return f"{item['loop']} ({item['pending']} pending)"
    if key == "registryInvalid":
        return f"{item['file']}: {item['entry']}: {item['rule']}: {item['detail']}"
    if key == "expiredLeases":
        return f"run {item['id']} {item['definition']} (worker {item['worker']}, lease expired {_ago(item['leaseExpiredAt'], now)})"
    if key == "interruptedRuns":
        return f"run {item['id']} {item['definition']} (attempt {item['attempt']}: {item['reason']}): retry or close it"
    if key == "starvedQueue":
        return (f"{item['loop']} ({item['queued']} queued, the oldest for {item['waitedSeconds']} s;"
                f" period {item['periodSeconds']} s)")
    if key == "stuckLoops":
        return f"{item['loop']} (last {len(item['eventIds'])} ticks NOOP previous_run_in_flight)"
    if key == "futureLastSlot":
        keyed = f", key {item['key']}" if item.get("key") else ""
        return f"{item['loop']} (last slot {item['lastSlot']}{keyed})"
    if key == "clockSkew":
        return f"{item['role']} {item['host']}:{item['pid']} ({item['clockOffsetSeconds']} s from the database's clock)"
    if key == "longPauses":
        return f"{item['loop']} (paused by {item['by']} {_ago(item['pausedAt'], now)})"
    if key == "runBacklog":
        return (f"{item['queued']} run(s) queued, the oldest for {item['waitedSeconds']} s"
                f" (warns past {item['warnRuns']} runs or {item['warnSeconds']} s)")
    return str(item)


def _lines(key: str, document: dict, now: datetime) -> list[str]:
    word = WORDS.get(key, key)
    if key == "slotLoopStale":
        last = (document.get("loop") or {}).get("lastIterationAt")
        return [f"{word}: last iteration {last}, {_ago(last, now)}" if last else f"{word}: it never ran"]
    if key == "databaseUnavailable":
        return [f"{word}: {document.get('detail', '')}"]
    listed = document.get(key)
    if not isinstance(listed, list) or not listed:
        # A registry that never loaded has no error of its own on disk to name.
        return [f"{word}: no registry in force" if key == "registryInvalid" else word]
    return [f"{word}: {_item(key, item, now)}" for item in listed]


def doctor_lines(document: dict, now: datetime) -> list[str]:
    """``["ok"]``, or ``["N anomalies", line, …]`` in ``anomalies`` order. Pure."""
    lines = [line for key in document["anomalies"] for line in _lines(key, document, now)]
    if not lines:
        return ["ok"]
    return [f"{len(lines)} {'anomaly' if len(lines) == 1 else 'anomalies'}", *lines]
