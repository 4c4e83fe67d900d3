"""Pausing and resuming a loop: runtime state an operator sets, journaled (docs/schedules.md, "Pausing a loop").

A pause is a ``LoopPause`` row. While it exists the slot loop treats the loop as disabled
(``schedules.state.sync_registry`` reads the pauses): no slot fires, no tick is admitted,
the state does not advance. Each function here invalidates the ``ScheduleSync`` row in its
transaction, so every slot-loop process re-syncs at its next iteration (the idle iteration's
fingerprint check, ``schedules.due_check``). Resuming behaves as re-enabling does: the
current slot fires with ``skippedSlots: 0``.

Journal actions (docs/design.md §9): ``loop_paused`` and ``loop_resumed`` (actor
``operator`` with the person's username; data ``{loop, note, via, until?, osUser?,
tokenLabel?}``; ``loop_resumed`` adds ``coveredSlots``, and ``auto: true`` with actor
``system`` when ``until`` ended the pause), and ``loop_pause_dropped`` (actor ``system``)
when the loop left the registry. Each also writes a ``LoopChange`` (``paused``,
``resumed``) that the earning report reads as a gap.

Events of the loop's type arriving through other doors (the bridge, ``inject``, GitHub)
are not touched: they plan as any other door's event does (watched).
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from lib.calendar import loop_rule
from lib.instants import format_instant
from lib.notes import check_note
from lib.refusals import Refused
from runtime.models import Actor
from runtime.registry import Loop, Registry
from runtime.services.journal import record

from .models import LoopChange, LoopChangeKind, LoopPause, ScheduleState, ScheduleSync

logger = logging.getLogger(__name__)

CONTROL_PERMISSION = "schedules.control_loop"
#: What a pause does to events of the loop's type from other doors: said by the CLI and the docs.
#: How far ahead a pause's ``until`` may lie, in days: a stop longer than this is a registry
#: change (disable the loop), reviewed as spec §10 asks, not a pause nobody would notice.
UNTIL_MAX_DAYS = 30
OTHER_DOORS = (
    "events of the loop's type from other doors (the bridge, inject, GitHub) are still admitted "
    "and planned as any other door's event: watched"
)


def resume_words(loop: Loop | None, covered: int | None = None) -> str:
    """What resuming ``loop`` does, in words (docs/schedules.md, "Pausing a loop"), with how
    many slots the pause ``covered`` when it is over: a keyed loop's rows that came due fire
    as its catch-up policy says; any other loop fires its current slot with no skips."""
    if loop is not None and loop.keyed is not None:
        return (f"each of its keys' rows that came due fires at the next iteration as its catch-up policy "
                f"({loop.catch_up}) says")
    if covered is None:
        return "its current slot fires at the next iteration, with no skips; the slots the pause covered are not fired"
    return f"the pause covered {covered} slot(s); its current slot fires at the next iteration, with no skips"


class PauseRefused(Refused):
    """A pause or resume that may not be taken: ``code`` is ``permission_denied`` (403),
    ``unknown_loop`` (404), ``already_paused``, ``not_paused`` or ``loop_disabled`` (409),
    ``note_required``, ``note_too_long``, ``invalid_note``, ``until_in_past`` or ``until_too_far`` (400)."""

    STATUS = {
        "permission_denied": 403, "unknown_loop": 404, "already_paused": 409, "not_paused": 409,
        "loop_disabled": 409, "note_required": 400, "note_too_long": 400, "invalid_note": 400, "until_in_past": 400,
        "until_too_far": 400,
    }

    def __init__(self, code: str, detail: str):
        super().__init__(code, detail, status=self.STATUS[code])


def check_control_permission(user, refusal: type[Refused]) -> None:
    """Raise ``refusal("permission_denied", …)`` unless ``user`` is active with ``control_loop``."""
    if user is None or not user.is_active or not user.has_perm(CONTROL_PERMISSION):
        name = user.get_username() if user is not None else "nobody"
        raise refusal("permission_denied", f"{name} lacks the control_loop permission")


def _loop(registry: Registry, name: str) -> Loop:
    loop = registry.loops.get(name)
    if loop is None:
        raise PauseRefused("unknown_loop", f"no loop named {name!r} in the registry in force")
    return loop


def _data(loop: str, note: str, via: str, os_user: str | None, token_label: str) -> dict:
    data = {"loop": loop, "note": note, "via": via}
    if os_user:
        data["osUser"] = os_user
    if token_label:
        data["tokenLabel"] = token_label
    return data


def _invalidate_sync() -> None:
    """Every slot-loop process re-syncs its states at its next iteration (reading the pauses)."""
    ScheduleSync.objects.all().delete()


def covered_slots(loop: Loop, since: datetime, now: datetime) -> int:
    """How many of ``loop``'s slots lie in ``(since, now]`` (a keyed loop: 0). Pure."""
    if loop.keyed is not None:
        return 0
    rule = loop_rule(loop)
    first, last = rule.floor(since), rule.floor(now)
    return rule.between(first, last) + 1 if last > first else 0


def pause_loop(
    name: str, *, registry: Registry, user, note: str, until: datetime | None, now: datetime, via: str,
    os_user: str | None = None, token_label: str = "",
) -> LoopPause:
    """Pause the enabled loop ``name`` as ``user`` (who needs ``control_loop``) at ``now``,
    with a required ``note`` and an optional ``until`` (after ``now``) when the slot loop
    resumes it by itself, at most ``UNTIL_MAX_DAYS`` ahead. Raises ``PauseRefused``."""
    check_control_permission(user, PauseRefused)
    loop = _loop(registry, name)
    # What the loop is comes before what the request says: a disabled or paused loop is
    # refused as such whatever its note.
    if not loop.enabled:
        raise PauseRefused("loop_disabled", f"{name} is disabled in the registry: there is nothing to pause")
    if LoopPause.objects.filter(loop=name).exists():
        raise PauseRefused("already_paused", f"{name} is already paused")
    note = note.strip()
    if not note:
        raise PauseRefused("note_required", "a pause needs a note saying why the loop is paused")
    check_note(note, PauseRefused)
    if until is not None and until <= now:
        raise PauseRefused("until_in_past", f"until {format_instant(until)} is not after now ({format_instant(now)})")
    if until is not None and until > now + timedelta(days=UNTIL_MAX_DAYS):
        raise PauseRefused("until_too_far", f"until {format_instant(until)} is more than {UNTIL_MAX_DAYS} days ahead: "
                                            "to stop a loop for longer, disable it in the registry")
    data = _data(name, note, via, os_user, token_label)
    if until is not None:
        data["until"] = format_instant(until)
    try:
        with transaction.atomic():
            pause = LoopPause.objects.create(loop=name, paused_at=now, paused_by=user, via=via, note=note, until=until)
            # Marked disabled, as the sync marks a disabled loop: resuming fires fresh, with no
            # skips. Due again only when ``until`` comes (the sync sets the same).
            ScheduleState.objects.filter(loop=name).update(enabled=False, next_due=until)
            LoopChange.objects.create(loop=name, at=now, kind=LoopChangeKind.PAUSED)
            record("loop_paused", Actor.OPERATOR, at=now, actor_name=user.get_username(), data=data)
            _invalidate_sync()
    except IntegrityError:
        raise PauseRefused("already_paused", f"{name} is already paused") from None
    logger.warning("loop %s paused by %s via %s", name, user.get_username(), via,
                   extra={"action": "loop_paused", "loop": name})
    return pause


def resume_loop(
    name: str, *, registry: Registry, user, note: str = "", now: datetime, via: str,
    os_user: str | None = None, token_label: str = "",
) -> int:
    """Lift the pause of ``name`` as ``user`` (who needs ``control_loop``) at ``now``;
    returns how many slots the pause covered. Raises ``PauseRefused``."""
    check_control_permission(user, PauseRefused)
    note = note.strip()
    check_note(note, PauseRefused)
    if name not in registry.loops and not LoopPause.objects.filter(loop=name).exists():
        raise PauseRefused("unknown_loop", f"no loop named {name!r} in the registry in force")
    data = _data(name, note, via, os_user, token_label)
    if not note:
        del data["note"]
    covered = _lift(name, registry, now, actor=Actor.OPERATOR, actor_name=user.get_username(), data=data)
    if covered is None:
        raise PauseRefused("not_paused", f"{name} is not paused")
    logger.warning("loop %s resumed by %s via %s", name, user.get_username(), via,
                   extra={"action": "loop_resumed", "loop": name})
    return covered


def _lift(name: str, registry: Registry, now: datetime, *, actor: Actor, actor_name: str, data: dict) -> int | None:
    """Delete the pause of ``name`` and journal ``loop_resumed``; None when there was none."""
    with transaction.atomic():
        pause = LoopPause.objects.select_for_update().filter(loop=name).first()
        if pause is None:
            return None
        pause.delete()
        # Due now, whatever the sync does: a process whose sync read the pause just before
        # this commit records the fingerprint again, and the loop must not wait for the next
        # registry change (the iteration fires it fresh: its state is marked disabled).
        ScheduleState.objects.filter(loop=name).update(next_due=now)
        loop = registry.loops.get(name)
        covered = covered_slots(loop, pause.paused_at, now) if loop is not None else 0
        if loop is not None and loop.enabled:
            # A loop disabled meanwhile stays unwatched: its ``enabled`` change comes with the registry.
            LoopChange.objects.create(loop=name, at=now, kind=LoopChangeKind.RESUMED)
        record("loop_resumed", actor, at=now, actor_name=actor_name, data={**data, "coveredSlots": covered})
        _invalidate_sync()
    return covered


def resume_expired(registry: Registry, now: datetime) -> list[str]:
    """Resume every pause whose ``until`` has come (journaled ``loop_resumed``, actor
    ``system``, ``auto: true``); returns their loops. One query when there are none: the
    slot loop calls it only when an iteration has work (a pause's ``until`` is its ``next_due``)."""
    names = list(LoopPause.objects.filter(until__lte=now).values_list("loop", flat=True))
    for name in names:
        if _lift(name, registry, now, actor=Actor.SYSTEM, actor_name="",
                 data={"loop": name, "via": "until", "auto": True}) is not None:
            logger.warning("loop %s resumed: its pause ended", name, extra={"action": "loop_resumed", "loop": name})
    return names


def drop_removed(registry: Registry, pauses: dict[str, "datetime | None"], now: datetime) -> None:
    """Delete the pauses of loops no longer in ``registry`` (journaled ``loop_pause_dropped``);
    ``pauses`` (``paused_loops()``) loses them too. Called by the sync, in its transaction."""
    gone = [name for name in pauses if name not in registry.loops]
    for name in gone:
        LoopPause.objects.filter(loop=name).delete()
        record("loop_pause_dropped", Actor.SYSTEM, at=now, data={"loop": name})
        del pauses[name]
        logger.warning("loop %s left the registry; its pause is dropped", name,
                       extra={"action": "loop_pause_dropped", "loop": name})


def long_pauses(*, now: datetime, warn_seconds: int) -> list[dict]:
    """The pauses without ``until`` older than ``warn_seconds`` at ``now`` (the doctor's
    ``longPauses``): ``[{loop, pausedAt, by}]`` by loop. One query."""
    rows = LoopPause.objects.filter(until__isnull=True, paused_at__lt=now - timedelta(seconds=warn_seconds))
    return [
        {"loop": loop, "pausedAt": format_instant(at), "by": by}
        for loop, at, by in rows.order_by("loop").values_list("loop", "paused_at", "paused_by__username")
    ]


@dataclass(frozen=True)
class PauseView:
    """A loop's pause as the overview shows it (``schedules.overview``, the ``paused`` of
    ``schedule list --json``): who paused it (username), when, why, and until when (None:
    until resumed)."""

    by: str
    at: datetime
    note: str
    until: datetime | None

    def as_json(self) -> dict:
        """``{by, at, note, until}``, instants as text (``until`` null: until resumed)."""
        return {"by": self.by, "at": format_instant(self.at), "note": self.note,
                "until": format_instant(self.until) if self.until else None}

    def resumed_slot(self, loop: Loop) -> datetime | None:
        """The slot the paused ``loop`` fires when ``until`` comes (it fires fresh, as resumed);
        None until resumed, or for a keyed or disabled loop. Pure."""
        if self.until is None or loop.keyed is not None or not loop.enabled:
            return None
        return loop_rule(loop).floor(self.until)


def pauses_of(names: list[str] | None) -> dict[str, PauseView]:
    """The pauses of ``names`` (or of every loop), by loop. One query."""
    rows = LoopPause.objects.all() if names is None else LoopPause.objects.filter(loop__in=names)
    return {
        loop: PauseView(by, at, note, until)
        for loop, by, at, note, until in rows.values_list("loop", "paused_by__username", "paused_at", "note", "until")
    }


def paused_loops(names: list[str] | None = None) -> dict[str, datetime | None]:
    """The paused loops (of ``names``, or all) with their ``until`` (None: until resumed). One query."""
    rows = LoopPause.objects.all() if names is None else LoopPause.objects.filter(loop__in=names)
    return dict(rows.values_list("loop", "until"))
