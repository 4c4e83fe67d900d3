"""``manage.py schedule`` as text: the tables and listings its ``--json`` documents render to
(docs/schedules.md shows them). Pure functions of those documents."""

from lib.text_table import format_table

from .earning_evidence import VERDICT_WORDS
from .paging import PAGE_SIZE
from .web.words import outcome


def _outcome_text(item: dict) -> str:
    """The last outcome of a loop's item (``lastOutcome`` and ``lastRun``) as the dashboard says it."""
    return outcome(item["lastOutcome"], item.get("lastRun"), none="-")


def _cadence_text(item: dict) -> str:
    """``5m``, ``09:00 Europe/Budapest`` (``mon,fri 09:00 …`` on some days only) or ``keyed``."""
    if item["every"]:
        return item["every"]
    if "at" in item:
        days = ",".join(item["days"]) + " " if item["days"] else ""
        return f"{days}{item['at']} {item['timezone']}"
    return "keyed"


def list_text(items: list[dict]) -> str:
    """The loops as a table, in the order given. An item's ``status`` (``ops.schedule_status``:
    the dashboard's badges) fills STATUS; an item without one says ``stopped`` or ``-``."""
    headers = ["LOOP", "STATUS", "EVERY", "APPROVAL", "ENABLED", "SOURCE", "LAST SLOT FIRED", "NEXT SLOT DUE",
               "LAST OUTCOME", "PENDING"]
    rows = [[
        item["name"], item.get("status") or ("stopped" if item["stopped"] else "-"), _cadence_text(item), item["approval"],
        ("yes" if item["enabled"] else "no") + (", paused" if item.get("paused") else ""),
        item["source"] + (f" ({', '.join(item['overrides'])})" if item["overrides"] else ""),
        item["lastSlotFired"] or "never", item["nextSlotDue"] or "-", _outcome_text(item),
        str(item["pendingProposals"]),
    ] for item in items]
    return format_table(headers, rows)

def _paused_text(paused: dict | None) -> str:
    """``by carol at … until …: the note`` of a pause, or ``no``."""
    if not paused:
        return "no"
    until = f"until {paused['until']}" if paused["until"] else "until resumed"
    return f"by {paused['by']} at {paused['at']}, {until}: {paused['note']}"


def page_text(document: dict) -> str:
    """One page of ``schedule list`` (``{count, page, pageSize, results}``, the results in the
    dashboard's order: ``ops.schedule_status``): the table, then —
    when the loops do not all fit on it — which of them it shows and how many more follow
    (a page is never past the last: the command refuses that)."""
    items, count, page, size = document["results"], document["count"], document["page"], document["pageSize"]
    text = list_text(items)
    if page == 1 and len(items) == count:
        return text
    first = (page - 1) * size + 1
    shown = f"loops {first}-{first + len(items) - 1} of {count}, problems first"
    more = count - (first - 1) - len(items)
    if more > 0:
        shown += f"; {more} more: schedule list --page {page + 1}" + (f" --page-size {size}" if size != PAGE_SIZE else "")
    return f"{text}\n{shown}"


def show_text(document: dict) -> str:
    fields = [
        ("loop", document["name"]),
        ("every", _cadence_text(document)
         + (f" ({document['cadenceSeconds']} s)" if document["cadenceSeconds"] else "")),
        ("event type", document["eventType"]),
        ("catch-up", document["catchUp"]),
        ("singleton", "yes" if document["singleton"] else "no"),
        ("approval", document["approval"]),
        ("enabled", "yes" if document["enabled"] else "no"),
        ("source", document["source"] + (f" (overrides {', '.join(document['overrides'])})"
                                          if document["overrides"] else "")),
        ("last slot fired", document["lastSlotFired"] or "never"),
        ("last tick at", document["lastTickAt"] or "never"),
        ("next slot due", document["nextSlotDue"] or "- (disabled)"),
        ("last outcome", _outcome_text(document)),
        ("pending proposals", str(document["pendingProposals"])),
        ("stopped", "STOPPED: no tick for more than two intervals" if document["stopped"] else "no"),
        ("paused", _paused_text(document.get("paused"))),
    ]
    if "keyed" in document:
        keyed = document["keyed"]
        fields += [
            ("set by", ", ".join(keyed["setBy"])),
            ("cleared by", ", ".join(keyed["clearedBy"]) or "-"),
            ("keys", str(keyed["keys"])),
        ]
    width = max(len(name) for name, _ in fields)
    lines = [f"{name.ljust(width)}  {value}" for name, value in fields]
    rows = [[
        t["slot"] or "-", t["admittedAt"], str(t["skippedSlots"]), outcome(t["outcome"], none="-"),
        f"{t['proposal']['id']} {t['proposal']['status']}" if t["proposal"] else "-",
        f"{t['run']['id']} {t['run']['status']}" if t["run"] else "-",
    ] for t in document["ticks"]]
    if document.get("dueKeys"):
        lines += ["", "next due:", format_table(
            ["KEY", "NEXT DUE", "RULE", "LAST SLOT", "SET BY"],
            [[d["key"], d["nextDue"], d["rule"], d["lastSlot"] or "never", d["setBy"]] for d in document["dueKeys"]],
        )]
    lines += ["", "last ticks:" if rows else "no ticks yet"]
    if rows:
        lines.append(format_table(["SLOT", "ADMITTED AT", "SKIPPED", "OUTCOME", "PROPOSAL", "RUN"], rows))
    return "\n".join(lines)

def next_text(document: dict) -> str:
    note = "" if document["enabled"] else " (disabled: the slots it would fire if enabled)"
    if "local" in document:
        width = max(len(s) for s in document["slots"])
        slots = [f"{utc.ljust(width)}  {local} {document['timezone']}" for utc, local in zip(document["slots"], document["local"], strict=True)]
    else:
        slots = document["slots"]
    return "\n".join([f"next slots of {document['loop']}{note}:", *slots])

def next_keyed_text(document: dict) -> str:
    note = "" if document["enabled"] else " (disabled: nothing fires)"
    lines = [f"{document['keys']} key(s) in {document['loop']}{note}; due soonest:"]
    lines += [f"  {d['nextDue']}  {d['key']}  ({d['rule']})" for d in document["due"]]
    return "\n".join(lines)


def tick_text(document: dict) -> str:
    verb = "would fire" if document["dryRun"] else "fired"
    lines = [f"at {document['at']}: {len(document['ticks'])} tick(s) {verb}"]
    for t in document["ticks"]:
        already = t["alreadyAdmitted"] if document["dryRun"] else not t["admitted"]
        note = " (already admitted: a duplicate)" if already else ""
        lines.append(f"  {t['eventId']}  skippedSlots={t['skippedSlots']}{note}")
    if document["leftToTheSlotLoop"]:
        lines.append(
            "left to the slot loop (never fired, re-enabled or keyed: their first slot is the current one): "
            + ", ".join(document["leftToTheSlotLoop"])
        )
    if document["planned"] is not None:
        lines.append(f"planned {document['planned']} event(s)")
    return "\n".join(lines)


def _tally(counts: dict) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(counts.items())) or "none"


def scalar_text(value) -> str:
    """A JSON scalar of the evidence in words: ``yes``/``no`` for booleans, ``none`` for null."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def evidence_text(evidence: list[dict]) -> str:
    """The evidence of a verdict as a table: each criterion, required, observed, met, detail."""
    return format_table(
        ["CRITERION", "REQUIRED", "OBSERVED", "MET", "DETAIL"],
        [[c["criterion"], scalar_text(c["required"]), scalar_text(c["observed"]), "yes" if c["met"] else "no", c["detail"]]
         for c in evidence],
    )


def report_text(document: dict) -> str:
    """The earning report (``ops.earning.earning_report``) as labelled lines, the verdict and its
    evidence, then the diff (only for ``earned``)."""
    took = document["durationSeconds"]
    lines = [
        f"loop {document['loop']} ({document['approval']}, {document['source']}), "
        f"{document['since']} to {document['until']}",
        f"slots fired: {document['slots']}",
        f"planning: {_tally(document['planning'])}",
        f"NOOP reasons: {_tally(document['noopReasons'])}",
        f"proposals: {_tally(document['proposals'])}",
        f"decided by: {_tally(document['decidedBy'])}",
        f"runs: {_tally(document['runs'])}",
        "run duration: " + (f"median {took['median']} s, worst {took['worst']} s" if took["median"] is not None else "no finished run"),
        "mutating: " + {True: "yes", False: "no", None: "unknown"}[document["mutating"]],
        f"auto permitted by the registry's rules: {'yes' if document['autoAllowed'] else 'no'}: {document['why']}",
        f"verdict: {document['verdict']}: {VERDICT_WORDS[document['verdict']]}",
        "",
        evidence_text(document["evidence"]),
    ]
    text = "\n".join(lines)
    return text + "\n\n" + document["diff"].rstrip("\n") if document["diff"] else text
