"""What the operator's pages say about a loop and the doctor's findings, in words (docs/web.md); an
instant as a ``<time>`` (``runtime.admin.common.instant``)."""

from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from lib.instants import parse_instant
from runtime.admin.common import instant
from runtime.registry import Loop

#: The most items an anomaly of the banner names; the rest are counted ("and 12 more").
BANNER_ITEMS = 10
#: The inbox filtered to pending proposals (the admin's Proposals list).
PENDING_FILTER = {"status__exact": "pending"}


def cadence(loop: Loop) -> str:
    """``every 5m``, ``09:00 Europe/Budapest``, ``09:00 Europe/Budapest on mon, fri`` or ``keyed``."""
    if loop.keyed is not None:
        return "keyed (each key its own slots)"
    if loop.every:
        return f"every {loop.every}"
    days = f" on {', '.join(loop.days)}" if loop.days else ""
    return f"{loop.at} {loop.timezone}{days}"


def outcome(value: dict | None, last_run: dict | None = None, *, none: str = "—") -> str:
    """A ``lastOutcome`` (``{stage, value, reason}``) as ``run SUCCEEDED`` or ``planning NOOP
    (previous_run_in_flight)``; ``none`` when the loop never ticked.

    With the loop's ``lastRun`` (``schedules.last_run.LastRun.as_json``) when it is not the
    last tick's own run, the run comes first and then the tick: ``run 12 REAPED · newest tick:
    planning PROPOSED``, so a proposed (or rejected) tick does not hide what last ran."""
    if value is None and last_run is None:
        return none
    tick = none
    if value is not None:
        tick = f"{value['stage']} {value['value'] or 'not planned yet'}"
        tick = f"{tick} ({value['reason']})" if value["reason"] else tick
    if last_run is None or last_run["ofLastTick"]:
        return tick
    ended = last_run["finishedAt"] is not None
    said = (last_run["outcome"] or last_run["status"].upper()) if ended else last_run["status"]
    run = f"run {last_run['id']} {said}" + (f" ({last_run['reason']})" if ended and last_run["reason"] else "")
    return f"{run} · newest tick: {tick}"


def tally(counts: dict) -> str:
    """``{"approved": 3, "rejected": 1}`` as ``approved 3, rejected 1``; ``none`` when empty."""
    return ", ".join(f"{key} {n}" for key, n in sorted(counts.items(), key=lambda item: str(item[0]))) or "none"


def inbox_url(loop: str | None = None) -> str:
    """The admin's Proposals list filtered to pending ones (of ``loop`` when given)."""
    query = {**PENDING_FILTER, **({"loop": loop} if loop else {})}
    return reverse("admin:runtime_proposal_changelist") + "?" + urlencode(query)


def _loop_item(name: str, extra: str = "") -> dict:
    return {"text": format_html("{}{}", name, extra), "url": reverse("web:loop", args=[name])}


def _at(value: str | None) -> str:
    """A ``/status`` instant as the pages show one (a ``<time>`` in the reader's zone); ``ever`` for None."""
    return instant(parse_instant(value), relative=False) if value else "ever"


def _run_item(pk: int, extra: str) -> dict:
    return {"text": format_html("run {}{}", pk, extra), "url": reverse("admin:runtime_run_change", args=[pk])}


def _items(key: str, status: dict) -> list[dict]:
    """The links an anomaly's banner line names, from its ``/status`` list: the first ``BANNER_ITEMS``."""
    found = (status.get(key) or [])[:BANNER_ITEMS]
    if key == "stoppedSchedules":
        return [_loop_item(i["loop"], format_html(" (no tick since {}, expected by {})", _at(i["lastTickAt"]),
                                                  _at(i["expectedBy"]))) for i in found]
    if key == "proposalPileUps":
        return [_loop_item(i["loop"], f" ({i['pending']} pending)") for i in found]
    if key == "starvedQueue":
        return [_loop_item(i["loop"], f" ({i['queued']} queued, the oldest for {i['waitedSeconds']} s)") for i in found]
    if key == "stuckLoops":
        return [_loop_item(i["loop"], f" (last {len(i['eventIds'])} ticks NOOP previous_run_in_flight)") for i in found]
    if key == "futureLastSlot":
        return [_loop_item(i["loop"], format_html(" (last slot {}{})", _at(i["lastSlot"]),
                                                  f", key {i['key']}" if i.get("key") else "")) for i in found]
    if key == "longPauses":
        return [_loop_item(i["loop"], format_html(" (paused by {} at {})", i["by"], _at(i["pausedAt"]))) for i in found]
    if key == "expiredLeases":
        return [_run_item(i["id"], format_html(" {} (lease expired {}, worker {})", i["definition"],
                                               _at(i["leaseExpiredAt"]), i["worker"])) for i in found]
    if key == "interruptedRuns":
        return [_run_item(i["id"], f" {i['definition']} ({i['reason']}): retry or close it") for i in found]
    if key == "runBacklog":
        queued_runs = reverse("admin:runtime_run_changelist") + "?" + urlencode({"status__exact": "queued"})
        return [{"text": f"{i['queued']} run(s) queued, the oldest for {i['waitedSeconds']} s", "url": queued_runs}
                for i in found]
    if key == "clockSkew":
        return [{"text": f"{i['role']} {i['host']}:{i['pid']} ({i['clockOffsetSeconds']} s)", "url": ""} for i in found]
    if key == "registryInvalid":
        return [{"text": f"{e['file']}: {e['entry']}: {e['rule']}: {e['detail']}", "url": ""} for e in found]
    return []


#: One sentence per anomaly (docs/schedules.md, "The doctor").
SENTENCES = {
    "slotLoopStale": "The slot loop is not turning: no loop ticks.",
    "stoppedSchedules": "Stopped: enabled loops with no tick for more than two intervals.",
    "proposalPileUps": "Piling up: watched loops with more pending proposals than the threshold.",
    "registryInvalid": "The registry or overlay on disk does not validate; the last good one is in force.",
    "expiredLeases": "Runs whose lease expired: their worker died, hung or lost the database.",
    "interruptedRuns": "Interrupted runs wait for an operator to retry or close them.",
    "starvedQueue": "Starved: queued runs waited longer than one period of their loop; is a worker running?",
    "stuckLoops": "Stuck: the last 3 ticks all found the previous run still in flight.",
    "futureLastSlot": "A last fired slot lies in the future: the clock went back.",
    "clockSkew": "A process's clock is more than 5 s from the database's.",
    "longPauses": "Paused for long: loops paused without an end for more than FACTORY_PAUSE_WARN_SECONDS.",
    "runBacklog": "Run backlog: the workers do not keep up with the queued runs; are enough workers running?",
}


def banner(status: dict) -> list[dict]:
    """The doctor's anomalies as ``[{name, sentence, items: [{text, url}], more}]``, in ``anomalies`` order."""
    lines = []
    for name in status["anomalies"]:
        items = _items(name, status)
        listed = status.get(name)
        sentence = SENTENCES.get(name, name)
        if name == "slotLoopStale":
            loop = status.get("loop") or {}
            last = loop.get("lastIterationAt")
            sentence += f" Its last iteration: {last} ({loop.get('ageSeconds')} s ago)." if last else " It never ran."
        more = len(listed) - len(items) if isinstance(listed, list) else 0
        lines.append({"name": name, "sentence": sentence, "items": items, "more": more})
    return lines
