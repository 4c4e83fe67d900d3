"""The schedules overview: every effective loop and what it last did (docs/design.md §6, §10, §11; docs/schedules.md).

One computation serves ``GET /schedules``, ``manage.py schedule`` and the doctor, so the
three never disagree. Reading all loops costs five queries whatever their number
(schedule states with, for keyed loops, their key counts and earliest due row; last
ticks; their runs and each loop's last run (``schedules.last_run``); pending-proposal
counts; pauses); the per-loop work is pure arithmetic on
``now``, which the caller passes in.

Instants are written ``YYYY-MM-DDTHH:MM:SSZ`` (``lib.instants.format_instant``).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Protocol

from django.conf import settings
from django.db import connection
from django.db.models import Case, Count, Min, OuterRef, Q, QuerySet, Subquery, When

from lib.calendar import loop_rule
from lib.instants import format_instant
from lib.slots import due_slots, slot_floor
from runtime.models import TERMINAL_RUN_STATUSES, Event, Proposal, ProposalStatus, Run
from runtime.registry import Loop, Registry

from .keyed import Row
from .last_run import LastRun, last_run_event
from .models import KeyedSchedule, ScheduleState
from .names import loop_index
from .pausing import PauseView, pauses_of
from .rows import state_rows
from .ticks import is_fresh

#: An enabled loop with no admitted tick for more than this many intervals has stopped
#: (docs/design.md §11: "no admitted tick for more than two intervals while enabled").
STOPPED_AFTER_INTERVALS = 2
#: How many recent ticks ``schedule show`` lists.
SHOWN_TICKS = 10
#: How many due rows ``schedule show`` lists for a keyed loop.
SHOWN_DUE_ROWS = 5
#: A keyed loop has stopped when one of its rows stays due longer than this: the slot
#: loop fires a due row within a second or two, and a minute leaves room for a backlog
#: of thousands of keys (docs/design.md §11's "two expected slots", for slots that are per key).
KEYED_OVERDUE_SECONDS = 60


@lru_cache(maxsize=4096)
def _instant(value: datetime | None) -> str | None:
    # Cached: loops that ticked in one iteration share their slot and tick instants, and
    # formatting is a large part of serialising ten thousand loops.
    return format_instant(value) if value is not None else None


#: ``slot_floor`` memoised: over thousands of loops, the instants (``now``, the last fired
#: slots) and the cadences repeat.
_slot_floor = lru_cache(maxsize=4096)(slot_floor)

#: The ``ScheduleState`` fields the view reads; rows are fetched as named tuples of them,
#: which costs a fraction of model instances over thousands of loops.
STATE_FIELDS = ("loop", "last_slot", "last_event_id", "last_tick_at", "enabled", "enabled_since", "keys", "keys_next_due")


class LoopState(Protocol):
    """What the pure functions read of a loop's state: a ``ScheduleState`` or a row of ``STATE_FIELDS``."""

    last_slot: datetime | None
    last_event_id: str
    last_tick_at: datetime | None
    enabled: bool
    enabled_since: datetime | None


@dataclass(frozen=True)
class KeyedCounts:
    """A keyed loop's rows at a glance: how many keys, and the earliest next due (None: no keys)."""

    keys: int
    next_due: datetime | None


@dataclass(frozen=True)
class LastOutcome:
    """What became of a tick: its planning outcome, or its run's outcome once the run finished.

    ``stage`` is ``"planning"`` or ``"run"``; ``value`` is the planning outcome
    (``PROPOSED``, ``APPROVED``, ``NOOP``, ``REFUSED``; None while not planned yet) or the
    run's outcome (``SUCCEEDED``, ``FAILED``, …; its status in capitals when the run
    ended without one, e.g. ``ABANDONED``).
    """

    stage: str
    value: str | None
    reason: str

    def as_json(self) -> dict:
        return {"stage": self.stage, "value": self.value, "reason": self.reason}


def last_outcome(planning_outcome: str | None, planning_reason: str, run: dict | None) -> LastOutcome:
    """The outcome of one tick from its event's planning fields and its run (``status``,
    ``outcome``, ``reason``), if any. Pure."""
    if run is not None and run["status"] in TERMINAL_RUN_STATUSES:
        return LastOutcome("run", run["outcome"] or run["status"].upper(), run["reason"])
    return LastOutcome("planning", planning_outcome, planning_reason or "")


def next_slot_due(loop: Loop, state: LoopState | None, now: datetime, keyed: KeyedCounts | None = None) -> datetime | None:
    """The slot the loop fires next: the first slot the slot loop would fire at ``now``
    (already due: the next iteration fires it), else the slot after the last fired one;
    for a keyed loop, its earliest row's next due. None for a disabled loop. Pure; the
    same arithmetic as the slot loop (docs/design.md §5, §6)."""
    if not loop.enabled:
        return None
    if loop.keyed is not None:
        return keyed.next_due if keyed else None
    if loop.cadence_seconds is not None and not is_fresh(state):
        last = _slot_floor(state.last_slot, loop.cadence_seconds)
        if last >= _slot_floor(now, loop.cadence_seconds):
            return last + timedelta(seconds=loop.cadence_seconds)  # the usual case: nothing is due before the next slot
    rule = loop_rule(loop)
    due = due_slots(
        rule=rule,
        catch_up=loop.catch_up,
        last_fired=state.last_slot if state else None,
        fresh=is_fresh(state),
        now=now,
        catchup_limit=settings.FACTORY_CATCHUP_LIMIT,
    )
    return due[0].slot if due else rule.after(rule.floor(now))


def expected_by(loop: Loop, state: LoopState | None, keyed: KeyedCounts | None = None) -> datetime | None:
    """When an enabled loop must have admitted its next tick before it counts as stopped.

    Two intervals — two expected slots for a time-of-day loop — after its last tick, or,
    for a loop that never ticked, after the slot loop first saw it enabled
    (``enabledSince``) — docs/design.md §11. A keyed loop: ``KEYED_OVERDUE_SECONDS`` after its
    earliest row fell due (None without keys). None when the loop is disabled, or when
    the slot loop has not seen it (re-)enabled yet: then the slot loop is not turning,
    which is its own anomaly. Pure.
    """
    if not loop.enabled or state is None or not state.enabled:
        return None
    if loop.keyed is not None:
        if keyed is None or keyed.next_due is None:
            return None
        return keyed.next_due + timedelta(seconds=KEYED_OVERDUE_SECONDS)
    since = state.last_tick_at or state.enabled_since
    if since is None:
        return None
    if loop.cadence_seconds is not None:
        return since + STOPPED_AFTER_INTERVALS * timedelta(seconds=loop.cadence_seconds)
    rule = loop_rule(loop)
    floor = rule.floor(since)
    expected = floor
    for _ in range(STOPPED_AFTER_INTERVALS):
        expected = rule.after(expected)
    return expected + (since - floor)


@dataclass(frozen=True)
class LoopView:
    """One loop as ``GET /schedules`` and ``schedule list`` show it."""

    loop: Loop
    last_slot_fired: datetime | None
    last_tick_at: datetime | None
    next_slot_due: datetime | None
    last_outcome: LastOutcome | None
    pending_proposals: int
    expected_by: datetime | None
    stopped: bool
    keyed: KeyedCounts | None = None
    #: The loop's pause (docs/schedules.md, "Pausing a loop"), or None.
    paused: PauseView | None = None
    #: The loop's newest run, or None (``schedules.last_run``).
    last_run: LastRun | None = None

    def as_json(self) -> dict:
        """The item of ``schedule list --json`` (docs/schedules.md): camelCase, instants as text.

        A time-of-day loop adds ``at``, ``timezone`` and ``days`` (``every`` and
        ``cadenceSeconds`` null); a keyed loop adds ``keyed: {setBy, clearedBy, keys,
        nextDue}`` (docs/design.md §6). ``paused`` is null or ``{by, at, note, until}``
        (``until`` null: until resumed); a paused loop is never ``stopped``. ``lastRun`` is
        null or the loop's newest run (``LastRun.as_json``), which may be older than the
        last tick's planning that ``lastOutcome`` says.
        """
        loop = self.loop
        extension = {}
        if loop.at is not None:
            extension = {"at": loop.at, "timezone": loop.timezone, "days": list(loop.days)}
        if loop.keyed is not None:
            extension = {"keyed": {
                "setBy": sorted(loop.keyed.set_by), "clearedBy": sorted(loop.keyed.cleared_by),
                "keys": self.keyed.keys if self.keyed else 0,
                "nextDue": _instant(self.keyed.next_due) if self.keyed else None,
            }}
        return {
            "name": loop.name,
            "every": loop.every,
            "cadenceSeconds": loop.cadence_seconds,
            "eventType": loop.event_type,
            "catchUp": loop.catch_up,
            "singleton": loop.singleton,
            "approval": loop.approval,
            "enabled": loop.enabled,
            "source": loop.source,
            "overrides": list(loop.overrides),
            "lastSlotFired": _instant(self.last_slot_fired),
            "lastTickAt": _instant(self.last_tick_at),
            "nextSlotDue": _instant(self.next_slot_due),
            "lastOutcome": self.last_outcome.as_json() if self.last_outcome else None,
            "lastRun": self.last_run.as_json() if self.last_run else None,
            "pendingProposals": self.pending_proposals,
            "stopped": self.stopped,
            "paused": self.paused.as_json() if self.paused else None,
            **extension,
        }


def loop_view(
    loop: Loop,
    state: LoopState | None,
    last_tick: dict | None,
    last_run: dict | None,
    pending: int,
    now: datetime,
    paused: PauseView | None = None,
    newest_run: LastRun | None = None,
) -> LoopView:
    """Assemble one loop's view from rows already read. Pure.

    ``last_tick`` holds the last tick's ``planning_outcome`` and ``planning_reason``;
    ``last_run`` its run's ``status``, ``outcome`` and ``reason``; for a keyed loop, the
    state row carries ``keys`` and ``keys_next_due``; ``paused`` is the loop's pause
    (``pauses_of``): the loop is then not stopped, and its next slot is none (or, for a
    pause with ``until``, the slot it fires then); ``newest_run`` the loop's last run.
    """
    keyed = None
    if loop.keyed is not None:
        keyed = KeyedCounts(getattr(state, "keys", None) or 0, getattr(state, "keys_next_due", None))
    deadline = expected_by(loop, state, keyed) if paused is None else None
    outcome = None
    if last_tick is not None:
        outcome = last_outcome(last_tick["planning_outcome"], last_tick["planning_reason"], last_run)
    return LoopView(
        loop=loop,
        last_slot_fired=state.last_slot if state else None,
        last_tick_at=state.last_tick_at if state else None,
        next_slot_due=next_slot_due(loop, state, now, keyed) if paused is None else paused.resumed_slot(loop),
        last_outcome=outcome,
        pending_proposals=pending,
        expected_by=deadline,
        stopped=deadline is not None and now > deadline,
        keyed=keyed,
        paused=paused,
        last_run=newest_run,
    )


def schedules_overview(registry: Registry, *, now: datetime, names: list[str] | None = None) -> list[LoopView]:
    """Every effective loop of ``registry`` (or only ``names``), by name, as seen at ``now``.

    Five queries whatever the number of loops: the loops' ``ScheduleState`` rows (as
    named tuples of ``STATE_FIELDS``, which the pure functions read like the model); their
    last ticks, found by the eventId each state records (the state is written in the
    tick's admission transaction, docs/design.md §5); those ticks' runs; the pending proposals
    counted per loop; the pauses (``pauses_of``).
    """
    loops = [registry.loops[name] for name in (sorted(names) if names is not None else loop_index(registry).names)]
    states_qs: QuerySet = ScheduleState.objects.all()
    if names is not None:
        states_qs = states_qs.filter(loop__in=names)
    states = {
        state.loop: state
        for state in state_rows(
            _with_keyed_counts(states_qs, loops).annotate(last_run_event=last_run_event()),
            (*STATE_FIELDS, "last_run_event"),
        )
    }
    ticks_qs = Event.objects.filter(uid__in=states_qs.exclude(last_event_id="").values("last_event_id"))
    ticks = {
        row["uid"]: row
        for row in ticks_qs.values("id", "uid", "planning_outcome", "planning_reason")
    }
    # The last ticks' runs and each loop's newest run, in one query.
    newest = states_qs.annotate(last_run_event=last_run_event()).values("last_run_event")
    runs = {
        row["event_id"]: row
        for row in Run.objects.filter(Q(event_id__in=ticks_qs.values("id")) | Q(event_id__in=newest)).values(
            "id", "event_id", "status", "outcome", "reason", "finished_at",
        )
    }
    pending = pending_counts(names)
    pauses = pauses_of(names)
    views = []
    for loop in loops:
        state = states.get(loop.name)
        tick = ticks.get(state.last_event_id) if state else None
        run = runs.get(tick["id"]) if tick else None
        newest_run = LastRun.of(runs.get(state.last_run_event) if state else None, last_tick_id=tick["id"] if tick else None)
        views.append(loop_view(
            loop, state, tick, run, pending.get(loop.name, 0), now, pauses.get(loop.name), newest_run,
        ))
    return views


def schedules_page(registry: Registry, *, now: datetime, offset: int, limit: int) -> tuple[list[LoopView], int]:
    """The loops from position ``offset`` (from 0), at most ``limit``, by name, and how many
    loops there are. The page's names are a slice of ``loop_index``; only their rows are read
    (``schedules_overview``'s five queries, none for an empty page)."""
    names = loop_index(registry).names
    page = list(names[offset:offset + limit])
    return (schedules_overview(registry, now=now, names=page) if page else []), len(names)


def pending_counts(names: list[str] | None) -> dict[str, int]:
    """The pending proposals of each loop (of ``names``, or of every loop) that has any. One
    query on ``proposal_pending_idx``: 'pending' is a literal, as the index states it, because
    SQLite uses a partial index only when the query repeats its condition, which a bound
    parameter never does."""
    quote = connection.ops.quote_name
    table, loop = quote(Proposal._meta.db_table), quote("loop")
    sql = f"SELECT {loop}, COUNT(*) FROM {table} WHERE status = '{ProposalStatus.PENDING.value}' AND {loop} IS NOT NULL"
    params: list[str] = []
    if names is not None:
        if not names:
            return {}
        sql += f" AND {loop} IN ({', '.join(['%s'] * len(names))})"
        params = list(names)
    with connection.cursor() as cursor:
        cursor.execute(sql + f" GROUP BY {loop}", params)
        return dict(cursor.fetchall())


def _with_keyed_counts(states: QuerySet, loops: list[Loop]) -> QuerySet:
    """The state rows annotated with ``keys`` and ``keys_next_due``, computed for keyed loops
    only (a ``CASE``: the subqueries run on ``keyed_due_idx`` for those rows alone)."""
    keyed = [loop.name for loop in loops if loop.keyed is not None]
    rows = KeyedSchedule.objects.filter(loop=OuterRef("loop")).order_by().values("loop")
    return states.annotate(
        keys=Case(When(loop__in=keyed, then=Subquery(rows.annotate(n=Count("id")).values("n")))),
        keys_next_due=Case(When(loop__in=keyed, then=Subquery(rows.annotate(d=Min("next_due")).values("d")))),
    )


def due_keys(loop_name: str, *, limit: int = SHOWN_DUE_ROWS) -> list[dict]:
    """The keyed loop's ``limit`` rows due soonest: ``{key, nextDue, rule, lastSlot, setBy}``. One query."""
    rows = KeyedSchedule.objects.filter(loop=loop_name).order_by("next_due", "id")[:limit]
    return [
        {"key": row.key, "nextDue": _instant(row.next_due), "rule": Row.of(row).describe(),
         "lastSlot": _instant(row.last_slot), "setBy": row.set_by}
        for row in rows
    ]


def recent_ticks(loop_name: str, *, limit: int = SHOWN_TICKS) -> list[dict]:
    """The loop's last ``limit`` ticks, newest first, with their proposal, run and outcome.

    Two queries: the ticks (index ``event_tick_idx``), then their proposals with runs.
    """
    events = list(
        Event.objects.filter(loop=loop_name).order_by("-id").values(
            "id", "uid", "slot", "admitted_at", "payload", "planning_outcome", "planning_reason"
        )[:limit]
    )
    proposals = {
        proposal.event_id: proposal
        for proposal in Proposal.objects.filter(event_id__in=[e["id"] for e in events]).select_related("run")
    }
    result = []
    for event in events:
        proposal = proposals.get(event["id"])
        run = getattr(proposal, "run", None) if proposal else None
        run_row = {"status": run.status, "outcome": run.outcome, "reason": run.reason} if run else None
        result.append({
            "eventId": event["uid"],
            "slot": _instant(event["slot"]),
            "admittedAt": _instant(event["admitted_at"]),
            "skippedSlots": event["payload"].get("skippedSlots"),
            "outcome": last_outcome(event["planning_outcome"], event["planning_reason"], run_row).as_json(),
            "proposal": {"id": proposal.pk, "status": proposal.status} if proposal else None,
            "run": {"id": run.pk, **run_row} if run else None,
        })
    return result


def next_slots(view: LoopView, *, count: int, now: datetime) -> list[datetime]:
    """The loop's next ``count`` slots: from its next slot due, or, for a disabled loop,
    the slots after ``now`` it would fire on if enabled. Pure. A keyed loop's slots are
    per key (``due_keys``): raises ValueError."""
    if view.loop.keyed is not None:
        raise ValueError(f"loop {view.loop.name} is keyed: its slots are per key")
    rule = loop_rule(view.loop)
    slots = [view.next_slot_due if view.next_slot_due is not None else rule.after(rule.floor(now))]
    while len(slots) < count:
        slots.append(rule.after(slots[-1]))
    return slots
