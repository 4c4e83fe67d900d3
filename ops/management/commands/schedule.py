"""``manage.py schedule``: "is it running, when did it last fire, what happened" (docs/design.md §10; docs/schedules.md).

- ``schedule`` / ``schedule list [--json]``: every effective loop, as ``GET /schedules``;
- ``schedule show LOOP [--json]``: one loop and its last ten ticks with their outcomes;
- ``schedule next LOOP [-n K] [--json]``: its next K slots, in UTC and, for a
  time-of-day loop, in its zone; for a keyed loop, the K rows due soonest;
- ``schedule tick [--at ISO-8601] [--dry-run] [--json]``: one iteration of the slot loop
  as if at that instant. A future instant is refused unless ``--dry-run``: firing it
  would record a slot that has not come, and the loop would stay silent until then.
  ``--dry-run`` writes nothing and prints what would fire.
- ``schedule rebuild LOOP [--json]``: empty a keyed loop's rows and replay its setting
  and clearing events and its admitted ticks, in admission order (docs/design.md §6).

Exit 2 when refused (an unknown loop, a bad or future instant, rebuilding a loop that is
not keyed).
"""

import argparse
import json
from zoneinfo import ZoneInfo

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from lib.instants import InstantError, format_instant, parse_instant
from ops.slot_loop import iterate
from runtime.models import Event
from runtime.registry import RegistryInvalid, store
from schedules.envelope import tick_envelope
from schedules.keyed import rebuild
from schedules.models import ScheduleState
from schedules.overview import due_keys, next_slots, recent_ticks, schedules_overview
from schedules.ticks import due_ticks

EXIT_REFUSED = 2
DEFAULT_NEXT = 5
MAX_NEXT = 1000


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [headers, *rows]]
    return "\n".join(lines)


def _outcome_text(outcome: dict | None) -> str:
    if outcome is None:
        return "-"
    text = f"{outcome['stage']} {outcome['value'] or 'not planned yet'}"
    return f"{text} ({outcome['reason']})" if outcome["reason"] else text


def _cadence_text(item: dict) -> str:
    """``5m``, ``09:00 Europe/Budapest`` (``mon,fri 09:00 …`` on some days only) or ``keyed``."""
    if item["every"]:
        return item["every"]
    if "at" in item:
        days = ",".join(item["days"]) + " " if item["days"] else ""
        return f"{days}{item['at']} {item['timezone']}"
    return "keyed"


def _count(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_NEXT:
        raise argparse.ArgumentTypeError(f"between 1 and {MAX_NEXT}")
    return value


class Command(BaseCommand):
    help = "Show the loops: cadence, approval, last slot fired, next slot due, last outcome; or fire one iteration."
    # Not the registry system check: a registry that does not load is reported with its
    # errors and a pointer to the running runtime's last good one (GET /schedules).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        sub = parser.add_subparsers(dest="action")
        as_json = {"action": "store_true", "default": argparse.SUPPRESS, "help": "print JSON instead of text"}
        sub.add_parser("list", help="every effective loop (the default)").add_argument("--json", **as_json)
        show = sub.add_parser("show", help="one loop and its last ten ticks")
        show.add_argument("loop")
        show.add_argument("--json", **as_json)
        upcoming = sub.add_parser("next", help="a loop's next slots")
        upcoming.add_argument("loop")
        upcoming.add_argument("-n", type=_count, default=DEFAULT_NEXT, help=f"how many slots (default {DEFAULT_NEXT})")
        upcoming.add_argument("--json", **as_json)
        tick = sub.add_parser("tick", help="one iteration of the slot loop as if at an instant")
        tick.add_argument("--at", help="the instant, RFC 3339 with an offset (default: now); future only with --dry-run")
        tick.add_argument("--dry-run", action="store_true", help="write nothing; print what would fire")
        tick.add_argument("--json", **as_json)
        again = sub.add_parser("rebuild", help="rebuild a keyed loop's rows from its events")
        again.add_argument("loop")
        again.add_argument("--json", **as_json)

    def handle(self, *args, **options):
        try:
            return self.act(options, timezone.now())
        except RegistryInvalid as exc:
            for error in exc.errors:
                self.stderr.write(str(error))
            raise CommandError(
                f"the registry on disk does not validate ({len(exc.errors)} error(s)): fix it (`registry check`); "
                "a running runtime keeps its last good registry, and GET /schedules shows it"
            ) from None
        except OverflowError:
            raise CommandError(
                "that instant is too close to the ends of the calendar to compute slots around it",
                returncode=EXIT_REFUSED,
            ) from None

    def act(self, options, now) -> None:
        action = options["action"] or "list"
        if action == "tick":
            return self.tick(options, now)
        store.refresh()
        registry = store.current()
        if action == "list":
            return self.emit(options, [v.as_json() for v in schedules_overview(registry, now=now)], self.list_text)
        if options["loop"] not in registry.loops:
            raise CommandError(
                f"no loop named {options['loop']!r}; `schedule list` shows the loops", returncode=EXIT_REFUSED
            )
        loop = registry.loops[options["loop"]]
        if action == "rebuild":
            if loop.keyed is None:
                raise CommandError(f"loop {loop.name} is not keyed: it has no rows to rebuild", returncode=EXIT_REFUSED)
            report = rebuild(loop, now=now)
            document = {"loop": report.loop, "keys": report.keys, "events": report.events}
            return self.emit(options, document, lambda d: f"rebuilt {d['loop']}: {d['keys']} key(s) from {d['events']} event(s)")
        (view,) = schedules_overview(registry, now=now, names=[loop.name])
        if action == "show":
            document = {**view.as_json(), "ticks": recent_ticks(loop.name)}
            if loop.keyed is not None:
                document["dueKeys"] = due_keys(loop.name)
            return self.emit(options, document, self.show_text)
        document = {"loop": loop.name, "enabled": loop.enabled}
        if loop.keyed is not None:
            document.update(keys=view.keyed.keys, due=due_keys(loop.name, limit=options["n"]))
            return self.emit(options, document, self.next_keyed_text)
        slots = next_slots(view, count=options["n"], now=now)
        document["slots"] = [format_instant(s) for s in slots]
        if loop.timezone is not None:
            zone = ZoneInfo(loop.timezone)
            document.update(timezone=loop.timezone, local=[s.astimezone(zone).isoformat() for s in slots])
        return self.emit(options, document, self.next_text)

    def emit(self, options, document, as_text) -> None:
        if options["json"]:
            # Compact: indenting would switch json to its pure-Python encoder, several
            # times slower on a listing of thousands of loops.
            self.stdout.write(json.dumps(document, separators=(",", ":")))
        else:
            self.stdout.write(as_text(document))

    # --- text renderings -------------------------------------------------------------
    @staticmethod
    def list_text(items: list[dict]) -> str:
        headers = ["LOOP", "EVERY", "APPROVAL", "ENABLED", "SOURCE", "LAST SLOT FIRED", "NEXT SLOT DUE",
                   "LAST OUTCOME", "PENDING", "STOPPED"]
        rows = [[
            item["name"], _cadence_text(item), item["approval"], "yes" if item["enabled"] else "no",
            item["source"] + (f" ({', '.join(item['overrides'])})" if item["overrides"] else ""),
            item["lastSlotFired"] or "never", item["nextSlotDue"] or "-", _outcome_text(item["lastOutcome"]),
            str(item["pendingProposals"]), "STOPPED" if item["stopped"] else "-",
        ] for item in items]
        return _table(headers, rows)

    @staticmethod
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
            ("last outcome", _outcome_text(document["lastOutcome"])),
            ("pending proposals", str(document["pendingProposals"])),
            ("stopped", "STOPPED: no tick for more than two intervals" if document["stopped"] else "no"),
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
            t["slot"] or "-", t["admittedAt"], str(t["skippedSlots"]), _outcome_text(t["outcome"]),
            f"{t['proposal']['id']} {t['proposal']['status']}" if t["proposal"] else "-",
            f"{t['run']['id']} {t['run']['status']}" if t["run"] else "-",
        ] for t in document["ticks"]]
        if document.get("dueKeys"):
            lines += ["", "next due:", _table(
                ["KEY", "NEXT DUE", "RULE", "LAST SLOT", "SET BY"],
                [[d["key"], d["nextDue"], d["rule"], d["lastSlot"] or "never", d["setBy"]] for d in document["dueKeys"]],
            )]
        lines += ["", "last ticks:" if rows else "no ticks yet"]
        if rows:
            lines.append(_table(["SLOT", "ADMITTED AT", "SKIPPED", "OUTCOME", "PROPOSAL", "RUN"], rows))
        return "\n".join(lines)

    @staticmethod
    def next_text(document: dict) -> str:
        note = "" if document["enabled"] else " (disabled: the slots it would fire if enabled)"
        if "local" in document:
            width = max(len(s) for s in document["slots"])
            slots = [f"{utc.ljust(width)}  {local} {document['timezone']}" for utc, local in zip(document["slots"], document["local"], strict=True)]
        else:
            slots = document["slots"]
        return "\n".join([f"next slots of {document['loop']}{note}:", *slots])

    @staticmethod
    def next_keyed_text(document: dict) -> str:
        note = "" if document["enabled"] else " (disabled: nothing fires)"
        lines = [f"{document['keys']} key(s) in {document['loop']}{note}; due soonest:"]
        lines += [f"  {d['nextDue']}  {d['key']}  ({d['rule']})" for d in document["due"]]
        return "\n".join(lines)

    # --- tick ------------------------------------------------------------------------
    def tick(self, options, now) -> None:
        at = now
        if options["at"] is not None:
            try:
                at = parse_instant(options["at"])
            except InstantError as exc:
                raise CommandError(str(exc), returncode=EXIT_REFUSED) from None
        if at > now and not options["dry_run"]:
            raise CommandError(
                f"{format_instant(at)} is in the future: firing it would silence its loops until then; "
                "use --dry-run to see what would fire", returncode=EXIT_REFUSED,
            )
        if options["dry_run"]:
            ticks, planned = self.would_fire(at), None
        else:
            report = iterate(now=at, record_status=False)
            ticks = [
                {"loop": t.loop, "eventId": t.event_id, "slot": format_instant(t.slot),
                 "skippedSlots": t.skipped_slots, "admitted": t.admitted}
                for t in report.ticks
            ]
            planned = report.planned
        document = {"at": format_instant(at), "dryRun": options["dry_run"], "ticks": ticks, "planned": planned}
        self.emit(options, document, self.tick_text)

    @staticmethod
    def would_fire(at) -> list[dict]:
        """What an iteration at ``at`` would fire, read-only; ``alreadyAdmitted`` tells whether
        the eventId is already in the events table (admission would report a duplicate)."""
        store.refresh()
        states = {state.loop: state for state in ScheduleState.objects.all()}
        planned = [(loop, due) for loop, due, _ in due_ticks(now=at, registry=store.current(), states=states)]
        ids = [tick_envelope(loop, due)["eventId"] for loop, due in planned]
        existing = set(Event.objects.filter(uid__in=ids).values_list("uid", flat=True))
        return [
            {"loop": loop.name, "eventId": event_id, "slot": format_instant(due.slot),
             "skippedSlots": due.skipped_slots, "alreadyAdmitted": event_id in existing}
            for (loop, due), event_id in zip(planned, ids, strict=True)
        ]

    @staticmethod
    def tick_text(document: dict) -> str:
        verb = "would fire" if document["dryRun"] else "fired"
        lines = [f"at {document['at']}: {len(document['ticks'])} tick(s) {verb}"]
        for t in document["ticks"]:
            already = t["alreadyAdmitted"] if document["dryRun"] else not t["admitted"]
            note = " (already admitted: a duplicate)" if already else ""
            lines.append(f"  {t['eventId']}  skippedSlots={t['skippedSlots']}{note}")
        if document["planned"] is not None:
            lines.append(f"planned {document['planned']} event(s)")
        return "\n".join(lines)
