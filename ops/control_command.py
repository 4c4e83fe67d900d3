"""Taking a loop in hand from the CLI: ``schedule pause``, ``schedule resume`` and ``schedule
trigger`` (docs/schedules.md, "Pausing a loop" and "Running a loop once now").

- ``schedule pause LOOP --note TEXT [--until INSTANT] --as USER [--json]``: the loop fires
  no slot until resumed (or until ``--until``, RFC 3339 with an offset);
- ``schedule resume LOOP [--note TEXT] --as USER [--json]``: the loop fires its current
  slot at the next iteration, with no skips;
- ``schedule trigger LOOP [--key K] [--note TEXT] [--request-id ID] --as USER [--json]``: one
  event of the loop now, planned watched: it prints the proposal to decide.

``--as`` names the person (who needs ``schedules.control_loop``), as ``approve`` does; the
OS user is recorded beside them, with ``via: "cli"``. Exit 2 on a refusal, with
``refused: <code>: <detail>`` (``schedules.pausing.PauseRefused``,
``schedules.triggering.TriggerRefused``; ``unknown_user``, ``bad_instant``).
"""

import argparse
import getpass
import json
import sys
from datetime import datetime

from django.contrib.auth import get_user_model

from lib.instants import InstantError, format_instant, parse_instant
from lib.refusals import Refused
from runtime.management.local_times import add_local_argument
from runtime.registry import Registry
from schedules.pausing import OTHER_DOORS, pause_loop, resume_loop, resume_words
from schedules.triggering import trigger_loop

EXIT_REFUSED = 2


def add_parsers(sub, as_json: dict) -> None:
    """The ``pause`` and ``resume`` subcommands of ``schedule``."""
    pause = sub.add_parser("pause", help="stop a loop's slots until resumed (runtime state, journaled)")
    pause.add_argument("loop", help="the loop's name (see `schedule list`)")
    pause.add_argument("--note", required=True, help="why (required; at most 2,000 characters)")
    pause.add_argument("--until", help="resume by itself at this instant (RFC 3339 with an offset; at most 30 days ahead)")
    pause.add_argument("--as", dest="username", required=True, help="the operator (needs control_loop)")
    pause.add_argument("--json", **as_json)
    add_local_argument(pause, argparse.SUPPRESS)
    resume = sub.add_parser("resume", help="lift a loop's pause: its current slot fires, with no skips")
    resume.add_argument("loop", help="the paused loop's name")
    resume.add_argument("--note", default="", help="why (optional; at most 2,000 characters)")
    resume.add_argument("--as", dest="username", required=True, help="the operator (needs control_loop)")
    resume.add_argument("--json", **as_json)
    add_local_argument(resume, argparse.SUPPRESS)
    trigger = sub.add_parser("trigger", help="run a loop once now: one event, planned watched (a proposal to decide)")
    trigger.add_argument("loop", help="the loop's name")
    trigger.add_argument("--key", help="the key to run (a keyed loop only)")
    trigger.add_argument("--note", default="", help="why (optional; at most 2,000 characters)")
    trigger.add_argument("--request-id", help="8-64 letters, digits, - or _: the same id again admits nothing new")
    trigger.add_argument("--as", dest="username", required=True, help="the operator (needs control_loop)")
    trigger.add_argument("--json", **as_json)
    add_local_argument(trigger, argparse.SUPPRESS)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def run(command, options: dict, registry: Registry, now: datetime) -> None:
    """Pause or resume as ``options`` say, writing the outcome to ``command.stdout``; exit 2 when refused."""
    try:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise Refused("unknown_user", f"there is no user {options['username']!r}")
        if options["action"] == "pause":
            until = _instant(options["until"])
            pause = pause_loop(
                options["loop"], registry=registry, user=user, note=options["note"], until=until, now=now, via="cli",
                os_user=_os_user(),
            )
            document = {
                "loop": pause.loop, "paused": True, "by": user.get_username(), "at": format_instant(pause.paused_at),
                "note": pause.note, "until": format_instant(until) if until else None, "otherDoors": OTHER_DOORS,
            }
            text = (
                f"paused {pause.loop}" + (f" until {document['until']}" if until else " until resumed")
                + f": it fires no slot from the next iteration; {OTHER_DOORS}"
            )
        elif options["action"] == "trigger":
            document, text = _trigger(options, registry, user, now)
        else:
            covered = resume_loop(
                options["loop"], registry=registry, user=user, note=options["note"], now=now, via="cli", os_user=_os_user(),
            )
            document = {"loop": options["loop"], "paused": False, "coveredSlots": covered}
            text = f"resumed {options['loop']}: {resume_words(registry.loops.get(options['loop']), covered)}"
    except Refused as exc:
        command.stderr.write(f"refused: {exc.code}: {exc.detail}")
        sys.exit(EXIT_REFUSED)
    if options["json"]:
        command.stdout.write(json.dumps(document, separators=(",", ":")))
    else:
        command.stdout.write(text)


def _trigger(options: dict, registry: Registry, user, now: datetime) -> tuple[dict, str]:
    done = trigger_loop(
        options["loop"], registry=registry, user=user, now=now, via="cli", key=options["key"], note=options["note"],
        request_id=options["request_id"], os_user=_os_user(),
    )
    head = (f"already triggered: {done.event.uid} (nothing new admitted)" if done.duplicate
            else f"triggered {options['loop']}: admitted {done.event.uid}")
    if done.proposal is not None:
        text = f"{head}; proposal {done.proposal.pk} is {done.proposal.status}: decide it with `approve {done.proposal.pk} --as {user.get_username()}`"
    else:
        text = f"{head}; planned {done.outcome} {done.reason}".rstrip()
    return done.as_json(), text


def _instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_instant(text)
    except InstantError as exc:
        raise Refused("bad_instant", str(exc)) from None

