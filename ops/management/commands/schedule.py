"""``manage.py schedule``: "is it running, when did it last fire, what happened" (docs/design.md §10; docs/schedules.md).

- ``schedule`` / ``schedule list [--page N] [--page-size M] [--json]``: the effective loops by
  name, as ``GET /schedules``: as text ``PAGE_SIZE`` a page with a line saying how many more;
  ``--json`` every loop, or with ``--page``/``--page-size`` one page ``{count, page, pageSize,
  results}`` (docs/schedules.md, "Paging");
- ``schedule show LOOP [--json]``: one loop and its last ten ticks with their outcomes;
- ``schedule next LOOP [-n K] [--json]``: its next K slots, in UTC and, for a
  time-of-day loop, in its zone; for a keyed loop, the K rows due soonest;
- ``schedule tick [--at ISO-8601] [--dry-run] [--json]``: one iteration of the slot loop
  as if at that instant. A future instant is refused unless ``--dry-run``: firing it
  would record a slot that has not come, and the loop would stay silent until then.
  ``--dry-run`` writes nothing and prints what would fire.
- ``schedule rebuild LOOP [--json]``: empty a keyed loop's rows and replay its setting
  and clearing events and its admitted ticks, in admission order (docs/design.md §6).
- ``schedule pause LOOP --note TEXT [--until INSTANT] --as USER`` and ``schedule resume LOOP
  [--note TEXT] --as USER``: pause and resume a loop (``ops.control_command``; docs/schedules.md,
  "Pausing a loop").
- ``schedule report LOOP [--since 7d|INSTANT] [--json]``: has the loop earned ``auto``?
  Its slots, outcomes, decisions and runs over the window, the verdict with each criterion's
  evidence, and for an ``earned`` loop the registry diff that flips it (``ops.earning``;
  spec §6). Exit 0 ``earned``, 3 ``not-earned``, 4 ``not-allowed``, 5 ``already-auto``
  (``ops.earning_evidence.EXIT_STATUS``).

Exit 2 when refused (an unknown loop, a bad or future instant or window, rebuilding a loop
that is not keyed, a page number or size out of range, a page past the last).
"""

import argparse
import json
import sys
from datetime import timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lib.cadence import MAX_CADENCE_SECONDS
from lib.instants import InstantError, format_instant, parse_instant
from ops import control_command
from ops.earning import WindowError, default_window, earning_report, window_start
from ops.earning_evidence import EXIT_STATUS
from ops.paging import MAX_PAGE, MAX_PAGE_SIZE, PAGE_SIZE, QUOTED, InvalidParameter, whole_number
from ops.schedule_status import ranked_page
from ops.schedule_text import list_text, next_keyed_text, next_text, page_text, report_text, show_text, tick_text
from ops.slot_loop import iterate
from runtime import clock
from runtime.management.local_times import add_local_argument, localized_output
from runtime.models import Event
from runtime.registry import RegistryInvalid, store
from schedules.envelope import tick_envelope
from schedules.keyed import rebuild
from schedules.overview import due_keys, next_slots, recent_ticks, schedules_overview, schedules_page
from schedules.pausing import paused_loops
from schedules.state import read_states
from schedules.ticks import due_ticks, left_to_the_slot_loop

EXIT_REFUSED = 2
DEFAULT_NEXT = 5
MAX_NEXT = 1000
#: What the ``loop`` argument of ``show``, ``next`` and ``report`` is.
LOOP_HELP = "the loop's name (see `schedule list`)"


def _whole_number(name: str, high: int):
    """An argparse type: ``ops.paging.whole_number`` (ASCII digits from 1 to ``high``), its refusal
    naming the value given."""
    def parse(text: str) -> int:
        try:
            return whole_number(text, name, high)
        except InvalidParameter:
            raise argparse.ArgumentTypeError(f"a whole number from 1 to {high}, not {text[:QUOTED]!r}") from None
    return parse


class Command(BaseCommand):
    help = "Show the loops: cadence, approval, last slot fired, next slot due, last outcome; or fire one iteration."
    # Not the registry system check: a registry that does not load is reported with its
    # errors and a pointer to the running runtime's last good one (GET /schedules).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        add_local_argument(parser)
        sub = parser.add_subparsers(dest="action")
        as_json = {"action": "store_true", "default": argparse.SUPPRESS, "help": "print JSON instead of text"}
        listing = sub.add_parser("list", help="the effective loops by name (the default)")
        listing.add_argument("--page", type=_whole_number("page", MAX_PAGE), help="the page, from 1 (default 1)")
        listing.add_argument(
            "--page-size", type=_whole_number("page-size", MAX_PAGE_SIZE),
            help=f"loops a page (default {PAGE_SIZE}, at most {MAX_PAGE_SIZE})",
        )
        listing.add_argument("--json", **as_json)
        add_local_argument(listing, argparse.SUPPRESS)
        show = sub.add_parser("show", help="one loop and its last ten ticks")
        show.add_argument("loop", help=LOOP_HELP)
        show.add_argument("--json", **as_json)
        add_local_argument(show, argparse.SUPPRESS)
        upcoming = sub.add_parser("next", help="a loop's next slots")
        upcoming.add_argument("loop", help=LOOP_HELP)
        upcoming.add_argument("-n", type=_whole_number("n", MAX_NEXT), default=DEFAULT_NEXT, help=f"how many slots (default {DEFAULT_NEXT})")
        upcoming.add_argument("--json", **as_json)
        add_local_argument(upcoming, argparse.SUPPRESS)
        tick = sub.add_parser("tick", help="one iteration of the slot loop as if at an instant")
        tick.add_argument("--at", help="the instant, RFC 3339 with an offset (default: now); future only with --dry-run")
        tick.add_argument("--dry-run", action="store_true", help="write nothing; print what would fire")
        tick.add_argument("--json", **as_json)
        add_local_argument(tick, argparse.SUPPRESS)
        again = sub.add_parser("rebuild", help="rebuild a keyed loop's rows from its events")
        again.add_argument("loop", help="a keyed loop's name")
        again.add_argument("--json", **as_json)
        add_local_argument(again, argparse.SUPPRESS)
        report = sub.add_parser("report", help="has a watched loop earned auto? its history over a window")
        report.add_argument("loop", help=LOOP_HELP)
        report.add_argument(
            "--since", help="a span (90m, 7d) or an instant (default: FACTORY_EARN_WINDOW_DAYS, 7d unless set longer)"
        )
        report.add_argument("--json", **as_json)
        add_local_argument(report, argparse.SUPPRESS)
        control_command.add_parsers(sub, as_json)

    def handle(self, *args, **options):
        try:
            with localized_output(self, options):
                return self.act(options, clock.database_now())
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
            return self.listing(options, registry, now)
        if action in ("pause", "resume", "trigger"):
            return control_command.run(self, options, registry, now)
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
        if action == "report":
            try:
                since = window_start(default_window() if options["since"] is None else options["since"], now=now)
            except WindowError as exc:
                raise CommandError(f"--since {exc}", returncode=EXIT_REFUSED) from None
            document = earning_report(registry, loop.name, since=since, now=now, registry_dir=settings.FACTORY_REGISTRY_DIR)
            self.emit(options, document, report_text)
            # The verdict is the exit status, so a script can ask "earned?" (0) without parsing.
            status = EXIT_STATUS[document["verdict"]]
            if status:
                self.stdout.flush()
                sys.exit(status)
            return None
        (view,) = schedules_overview(registry, now=now, names=[loop.name])
        if action == "show":
            document = {**view.as_json(), "ticks": recent_ticks(loop.name)}
            if loop.keyed is not None:
                document["dueKeys"] = due_keys(loop.name)
            return self.emit(options, document, show_text)
        document = {"loop": loop.name, "enabled": loop.enabled}
        if loop.keyed is not None:
            document.update(keys=view.keyed.keys, due=due_keys(loop.name, limit=options["n"]))
            return self.emit(options, document, next_keyed_text)
        slots = next_slots(view, count=options["n"], now=now)
        document["slots"] = [format_instant(s) for s in slots]
        if loop.timezone is not None:
            zone = ZoneInfo(loop.timezone)
            document.update(timezone=loop.timezone, local=[s.astimezone(zone).isoformat() for s in slots])
        return self.emit(options, document, next_text)

    def listing(self, options, registry, now) -> None:
        """``schedule list``: text a page at a time; JSON whole unless a page is asked for."""
        number, size = options.get("page"), options.get("page_size")
        if options["json"] and number is None and size is None:
            return self.emit(options, [v.as_json() for v in schedules_overview(registry, now=now)], list_text)
        number, size = number or 1, size or PAGE_SIZE
        if options["json"]:
            views, count = schedules_page(registry, now=now, offset=(number - 1) * size, limit=size)
            results = [v.as_json() for v in views]
        else:
            # The text ranks problems first, as the dashboard does; JSON stays by name.
            results, count = ranked_page(registry, now=now, offset=(number - 1) * size, limit=size)
        last = max(1, -(-count // size))
        if number > last:
            raise CommandError(
                f"there is no page {number}: {count} loop(s) make {last} page(s) of {size}", returncode=EXIT_REFUSED
            )
        document = {"count": count, "page": number, "pageSize": size, "results": results}
        return self.emit(options, document, page_text)

    def emit(self, options, document, as_text) -> None:
        if options["json"]:
            # Compact: indenting would switch json to its pure-Python encoder, several
            # times slower on a listing of thousands of loops.
            self.stdout.write(json.dumps(document, separators=(",", ":")))
        else:
            self.stdout.write(as_text(document))

    # --- tick ------------------------------------------------------------------------
    def tick(self, options, now) -> None:
        at = now
        if options["at"] is not None:
            try:
                at = parse_instant(options["at"])
            except InstantError as exc:
                raise CommandError(f"--at {exc}", returncode=EXIT_REFUSED) from None
            # The slots around ``at`` must be computable for the longest cadence, whichever
            # loops happen to be due (an OverflowError is answered below).
            _ = (at - timedelta(seconds=MAX_CADENCE_SECONDS), at + timedelta(seconds=MAX_CADENCE_SECONDS))
        if at > now and not options["dry_run"]:
            raise CommandError(
                f"{format_instant(at)} is in the future: firing it would silence its loops until then; "
                "use --dry-run to see what would fire", returncode=EXIT_REFUSED,
            )
        store.refresh()
        registry = store.current()
        # A hand-run instant in the past fires no loop's first slot (docs/schedules.md).
        pretend = options["at"] is not None and at <= now
        left = left_to_the_slot_loop(registry, read_states()) if pretend else []
        if options["dry_run"]:
            ticks, planned = self.would_fire(at, registry, set(left)), None
        else:
            report = iterate(now=now, at=at if pretend else None, record_status=False)
            ticks = [
                {"loop": t.loop, "eventId": t.event_id, "slot": format_instant(t.slot),
                 "skippedSlots": t.skipped_slots, "admitted": t.admitted}
                for t in report.ticks
            ]
            planned = report.planned
        document = {
            "at": format_instant(at), "dryRun": options["dry_run"], "ticks": ticks, "planned": planned,
            "leftToTheSlotLoop": left,
        }
        self.emit(options, document, tick_text)

    @staticmethod
    def would_fire(at, registry, left: set[str]) -> list[dict]:
        """What an iteration at ``at`` would fire, read-only, but the loops in ``left``;
        ``alreadyAdmitted`` tells whether the eventId is already in the events table
        (admission would report a duplicate)."""
        paused = paused_loops()
        planned = [
            (loop, due) for loop, due, _ in due_ticks(now=at, registry=registry, states=read_states())
            if loop.name not in left and loop.name not in paused
        ]
        ids = [tick_envelope(loop, due)["eventId"] for loop, due in planned]
        existing = set(Event.objects.filter(uid__in=ids).values_list("uid", flat=True))
        return [
            {"loop": loop.name, "eventId": event_id, "slot": format_instant(due.slot),
             "skippedSlots": due.skipped_slots, "alreadyAdmitted": event_id in existing}
            for (loop, due), event_id in zip(planned, ids, strict=True)
        ]
