"""Each loop's status on the dashboard: the doctor's anomalies it stands in, late, ok or
disabled (docs/web.md, "Status badges"; the anomalies are docs/schedules.md's, "The doctor").

``loop_badges`` is pure: it takes the doctor's ``/status`` document (``ops.doctor.collect_status``)
and the late loops (``late_loops``: two queries on the schedule states, narrowed to the rows
that can be late, and one on the keyed rows when there are keyed loops), so badges cost the
same number of queries for a hundred loops as for a hundred thousand, and a page's badges
are computed for that page's loops only.
"""

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime, timedelta
from functools import lru_cache

from lib.calendar import loop_rule
from lib.slots import slot_floor
from runtime.models import Run
from runtime.registry import Loop, Registry
from schedules.findings import due_states, keyed_next_due, loop_index, ticked_late_states

#: A slot whose tick was admitted more than this many seconds after the slot started (or after
#: the slot loop first saw the loop enabled, whichever is later), or is still not admitted that
#: long after, is late: the slot loop turns every second, so five seconds is a slot loop that lagged.
LATE_AFTER_SECONDS = 5
#: The doctor's per-loop findings, in the order a row shows them: the ``/status`` key and its badge.
DOCTOR_BADGES = (
    ("stoppedSchedules", "stopped"),
    ("stuckLoops", "stuck"),
    ("starvedQueue", "starved"),
    ("interruptedRuns", "interrupted run"),
    ("expiredLeases", "expired lease"),
    ("proposalPileUps", "piling up"),
    ("futureLastSlot", "future last slot"),
    ("longPauses", "paused for long"),
)
LATE, OK, DISABLED, PAUSED = "late", "ok", "disabled", "paused"
#: ``slot_floor`` memoised: over thousands of loops, ``now`` and the cadences repeat.
_slot_floor = lru_cache(maxsize=4096)(slot_floor)
#: Problems first: any of the doctor's, then late or paused, then ok, then disabled (``rank``).
RANK = {LATE: 1, PAUSED: 1, OK: 2, DISABLED: 3}


def doctor_flags(status: dict, run_loops: dict[int, str | None]) -> dict[str, list[str]]:
    """Loop name → the doctor's badges for it, in ``DOCTOR_BADGES`` order, from the ``/status``
    document. ``run_loops`` maps the expired leases' run ids to their loops (``expired_lease_loops``).
    Items of no loop (an injected event's run) badge no row. Pure."""
    flags: dict[str, list[str]] = defaultdict(list)
    for key, badge in DOCTOR_BADGES:
        for item in status.get(key) or []:
            loop = run_loops.get(item["id"]) if key == "expiredLeases" else item.get("loop")
            if loop and badge not in flags[loop]:
                flags[loop].append(badge)
    return dict(flags)


def expired_lease_loops(status: dict) -> dict[int, str | None]:
    """The loops of the runs in ``expiredLeases`` (which names runs, not loops): one query, none when there are none."""
    ids = [item["id"] for item in status.get("expiredLeases") or []]
    return dict(Run.objects.filter(pk__in=ids).values_list("pk", "loop")) if ids else {}


def loop_badges(loop: Loop, flags: dict[str, list[str]], late: set[str], paused: Collection[str] = ()) -> list[str]:
    """The badges of one loop: ``paused`` (a loop in ``paused``) and the doctor's, else
    ``late``, ``ok`` or ``disabled``. Pure."""
    if not loop.enabled:
        return [DISABLED]
    found = list(flags.get(loop.name, ()))
    if loop.name in paused:
        return [PAUSED, *found]
    return found or [LATE if loop.name in late else OK]


def rank(badges: list[str]) -> int:
    """0 for any of the doctor's anomalies, then ``RANK``. Pure."""
    return min(RANK.get(badge, 0) for badge in badges)


def late_by(slot: datetime, admitted_at: datetime, watched_from: datetime | None = None) -> float | None:
    """The one lateness rule of the badges and the timeline (docs/web.md, "Status badges"):
    how many seconds after it was due a tick of ``slot`` admitted at ``admitted_at`` came,
    when that is more than ``LATE_AFTER_SECONDS``; else None. Pure.

    A slot is due at its start, or at ``watched_from`` if later: when the slot loop saw the
    loop enabled (first seen, re-enabled) or it was resumed. The first tick after that fires
    the slot already begun (docs/design.md §5), which is on time, not late by the part of the
    slot that passed before anyone asked for it."""
    due = max(slot, watched_from) if watched_from is not None else slot
    late = (admitted_at - due).total_seconds()
    return late if late > LATE_AFTER_SECONDS else None


def is_late(loop: Loop, state, now: datetime, keys_next_due: datetime | None = None) -> bool:
    """Whether an enabled loop is late at ``now`` (``LATE_AFTER_SECONDS``). Pure.

    ``state`` has ``last_slot``, ``last_tick_at`` (the last tick's admission), ``enabled``
    and ``enabled_since``; a loop the slot loop has not seen enabled (no state, or a disabled
    one) is not judged: then the slot loop is not turning, the doctor's ``slotLoopStale``.
    A slot is due at its start, or when the slot loop first saw the loop enabled if that is
    later (a loop's first tick fires its current slot, docs/design.md §5). An interval or
    time-of-day loop is late when its last fired tick was admitted late, or its current slot
    has not fired that long after it was due; a keyed loop when a row has been due that long.
    """
    if not loop.enabled or state is None or not state.enabled:
        return False
    grace = timedelta(seconds=LATE_AFTER_SECONDS)
    since = state.enabled_since

    def due(slot: datetime) -> datetime:
        return max(slot, since) if since is not None else slot

    if loop.keyed is not None:
        return keys_next_due is not None and now - due(keys_next_due) > grace
    if state.last_slot is not None and state.last_tick_at is not None and late_by(state.last_slot, state.last_tick_at, since):
        return True
    if loop.cadence_seconds is not None:
        current = _slot_floor(now, loop.cadence_seconds)
    else:
        current = loop_rule(loop).floor(now)
    if state.last_slot is not None and state.last_slot >= current:
        return False
    return now - due(current) > grace


def late_loops(registry: Registry, *, now: datetime) -> set[str]:
    """The names of the registry's late loops at ``now`` (``is_late``). Two queries on the schedule
    states, narrowed by the database to those that can be late (``schedules.findings``: the
    current slot due, or the last tick admitted past the grace), plus one for the keyed loops'
    earliest due rows (``keyed_due_idx``) when there are any."""
    grace = timedelta(seconds=LATE_AFTER_SECONDS)
    states = {**ticked_late_states(grace=grace), **due_states(due_by=now - grace)}
    due = keyed_next_due(loop_index(registry).keyed)
    return {
        name for name, state in states.items()
        if name in registry.loops and is_late(registry.loops[name], state, now, due.get(name))
    }
