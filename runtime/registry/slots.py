"""Where a loop's slots come from: an interval, a time of day, or keyed rows (DESIGN §5, §6).

``check_slots`` checks one merged loop entry for ``loops.effective_loops``;
``build_keyed`` turns a checked ``keyed`` declaration into its value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lib.cadence import CadenceError, parse_every, parse_wall_time

from .model import EventType, Keyed, KeyedSetter

if TYPE_CHECKING:
    from pathlib import Path

    from .loader import Load

#: A setting event's rule: exactly one of these pointers (DESIGN §6).
KEYED_RULES = ("at", "every", "once")


def check_slots(
    load: Load, path: Path, name: str, entry: dict, event_types: dict[str, EventType]
) -> tuple[bool, int | None]:
    """Check where a loop's slots come from; returns ``(ok, cadence seconds or None)``.

    Exactly one of ``every`` (DESIGN §5), ``at`` with ``timezone`` and optional
    ``days`` (DESIGN §6), or ``keyed`` (DESIGN §6, seed 000). Rules:
    ``cadence_conflict`` (two of them, or ``timezone``/``days`` without ``at``),
    ``unparseable_every``, ``invalid_time``, ``missing_timezone`` (no implicit server
    zone, ever), ``unknown_timezone``, ``never_ticks`` (nothing can ever tick the loop:
    no ``every``, no ``at``, no setting type — seed 000's load error), and the keyed
    rules of ``check_keyed``.
    """
    given = [k for k in ("every", "at", "keyed") if entry.get(k) is not None]
    if len(given) > 1:
        load.error(
            path, name, "cadence_conflict",
            f"give one of every, at or keyed, not {' and '.join(given)}"
            + (": a keyed loop takes each key's rule from its setting events" if "keyed" in given else ""),
        )
        return False, None
    if "at" not in entry and ("timezone" in entry or "days" in entry):
        load.error(path, name, "cadence_conflict", "timezone and days belong to a time of day (at)")
        return False, None
    if "every" in given:
        try:
            return True, parse_every(entry["every"])
        except CadenceError as exc:
            load.error(path, name, exc.code, str(exc))
            return False, None
    if "at" in given:
        return check_time_of_day(load, path, name, entry), None
    if "keyed" in given and entry["keyed"].get("setBy"):
        return check_keyed(load, path, name, entry["keyed"], event_types), None
    load.error(
        path, name, "never_ticks",
        "nothing can ever tick this loop: give every, at with timezone, or keyed with at least one setBy type",
    )
    return False, None


def check_time_of_day(load: Load, path: Path, name: str, entry: dict) -> bool:
    """``at`` is a wall time (``invalid_time``) in a named IANA zone (``missing_timezone``,
    ``unknown_timezone``) (DESIGN §6)."""
    ok = True
    try:
        parse_wall_time(entry["at"])
    except CadenceError as exc:
        load.error(path, name, "invalid_time", str(exc))
        ok = False
    if "timezone" not in entry:
        load.error(
            path, name, "missing_timezone",
            "a time of day needs its IANA timezone (e.g. Europe/Budapest); there is no implicit server zone",
        )
        return False
    try:
        ZoneInfo(entry["timezone"])
    except (ZoneInfoNotFoundError, ValueError):
        load.error(path, name, "unknown_timezone", f"{entry['timezone']!r} is not an IANA time zone")
        ok = False
    return ok


def check_keyed(load: Load, path: Path, name: str, keyed: dict, event_types: dict[str, EventType]) -> bool:
    """Every setting and clearing type is registered (``keyed_unregistered_type``); each
    setter points at exactly one rule, ``timezone`` with ``at`` and only with it (``keyed_rule``)."""
    ok = True
    for role, types in (("setBy", keyed.get("setBy") or {}), ("clearedBy", keyed.get("clearedBy") or {})):
        for event_type in types:
            if event_type not in event_types and ("event-types.json", event_type) not in load.broken:
                load.error(
                    path, name, "keyed_unregistered_type",
                    f"keyed.{role}: {event_type!r} is not in event-types.json",
                )
                ok = False
    for event_type, setter in (keyed.get("setBy") or {}).items():
        rules = [r for r in KEYED_RULES if r in setter]
        if len(rules) != 1:
            load.error(
                path, name, "keyed_rule",
                f"keyed.setBy.{event_type}: point at exactly one of at, every, once (found {', '.join(rules) or 'none'})",
            )
            ok = False
        elif ("at" in setter) != ("timezone" in setter):
            load.error(
                path, name, "keyed_rule",
                f"keyed.setBy.{event_type}: at needs a timezone pointer, and timezone belongs to at",
            )
            ok = False
    return ok


def build_keyed(keyed: dict) -> Keyed:
    """A checked ``keyed`` declaration as a ``Keyed`` value."""
    return Keyed(
        set_by={
            event_type: KeyedSetter(event_type=event_type, **setter)
            for event_type, setter in (keyed.get("setBy") or {}).items()
        },
        cleared_by={event_type: spec["key"] for event_type, spec in (keyed.get("clearedBy") or {}).items()},
    )
