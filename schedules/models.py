"""Schedule bookkeeping: derived data about loops; the events table stays the truth (docs/design.md §5)."""

from django.conf import settings
from django.db import models
from django.db.models import Q, TextChoices


class ScheduleState(models.Model):
    """Per loop: the last fired slot, the last tick, since when the loop is enabled, and
    when it is next due.

    Written in the transaction that admits the tick; if it were lost, the unique
    eventIds of the events table would still keep a slot from firing twice. ``next_due``
    is the first instant at which an iteration has something to fire for the loop (its
    slot after the last fired one; for a loop never fired or re-enabled, the instant it
    was seen so); null for a disabled, removed or keyed loop (keyed rows carry their
    own). An iteration reads only the rows due (``schedule_next_due_idx``); a registry
    change recomputes them (``schedules.state.sync_registry``).
    """

    # Unique through a constraint, not ``unique=True``: on PostgreSQL that would add a second,
    # pattern-ops index for LIKE 'prefix%', which nothing asks of loop names, and every
    # tick's state update (a new row version: its last slot and next due are indexed) paid
    # for it (docs/performance.md).
    loop = models.CharField(max_length=63)
    last_slot = models.DateTimeField(null=True, blank=True)
    last_event_id = models.CharField(max_length=200, blank=True, default="")
    last_tick_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    enabled_since = models.DateTimeField(null=True, blank=True)
    #: Keyed loops: every setting or clearing event with an id at or below it is applied
    #: (``schedules.keyed.apply_keyed_events``).
    keyed_cursor = models.BigIntegerField(default=0)
    next_due = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["loop"]
        indexes = [
            # The iteration's fetch: WHERE next_due <= now OR last_slot > now + tolerance.
            models.Index(fields=["next_due"], name="schedule_next_due_idx"),
            # A last slot in the future (a clock stepped back): few rows or none.
            models.Index(fields=["last_slot"], name="schedule_last_slot_idx"),
        ]
        constraints = [models.UniqueConstraint(fields=["loop"], name="schedule_state_one_per_loop")]

    def __str__(self) -> str:
        return f"{self.loop}: last slot {self.last_slot}"


class SlotLoopStatus(models.Model):
    """One row per slot-loop process name: when it last completed an iteration (the doctor reads it)."""

    name = models.CharField(max_length=100, unique=True)
    last_iteration_at = models.DateTimeField()
    #: How long that iteration took, in seconds of the process's monotonic clock (``/metrics``).
    last_iteration_seconds = models.FloatField(null=True, blank=True)
    pid = models.IntegerField()
    host = models.CharField(max_length=200)

    class Meta:
        verbose_name_plural = "slot loop status"

    def __str__(self) -> str:
        return f"{self.name} at {self.last_iteration_at}"


class ScheduleSync(models.Model):
    """Which registry the ``ScheduleState`` rows were last brought in line with: the
    fingerprint of its loops (``schedules.state.loops_fingerprint``). An iteration whose
    registry has another fingerprint syncs every row first (``sync_registry``); one that
    has the same reads only the due rows. Delete it to force a sync (after editing the
    states by hand)."""

    name = models.CharField(max_length=32, unique=True)
    fingerprint = models.CharField(max_length=64)
    synced_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.fingerprint[:12]} at {self.synced_at}"


class TickEmitterLease(models.Model):
    """Who emits ticks: one row (``name`` ``ticks``) that one slot-loop process holds at a
    time (docs/design.md §5; docs/operations.md, "Several runserve processes").

    ``holder`` is ``host:pid:token`` of the process; ``expires_at`` is on the database's
    clock, renewed every iteration and between the chunks of a burst. A process takes
    the row only when it holds it already or the row has expired, in one compare-and-swap
    update, so two processes never both emit.
    """

    name = models.CharField(max_length=32, unique=True)
    holder = models.CharField(max_length=200)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.holder} until {self.expires_at}"


class KeyedRule(models.TextChoices):
    """Where a keyed row's slots come from (docs/design.md §6): a wall time in a zone, an interval, one instant."""

    AT = "at"
    EVERY = "every"
    ONCE = "once"


class KeyedSchedule(models.Model):
    """One key of a keyed loop: its rule and the next slot it fires (docs/design.md §6).

    Set, replaced and deleted by the loop's setting and clearing events; advanced (or,
    for a ``once`` row, deleted) in the transaction that admits its tick. Derived data:
    ``manage.py schedule rebuild LOOP`` replays the events into the same rows.
    ``recorded_at`` is the setting event's admission instant and ``set_by`` its eventId.
    """

    loop = models.CharField(max_length=63)
    key = models.CharField(max_length=100)
    rule = models.CharField(max_length=5, choices=KeyedRule.choices)
    at = models.CharField(max_length=5, blank=True, default="")
    timezone = models.CharField(max_length=64, blank=True, default="")
    every_seconds = models.PositiveIntegerField(null=True, blank=True)
    next_due = models.DateTimeField()
    last_slot = models.DateTimeField(null=True, blank=True)
    last_event_id = models.CharField(max_length=200, blank=True, default="")
    last_tick_at = models.DateTimeField(null=True, blank=True)
    set_by = models.CharField(max_length=200)
    recorded_at = models.DateTimeField()

    class Meta:
        ordering = ["loop", "next_due", "key"]
        constraints = [
            models.UniqueConstraint(fields=["loop", "key"], name="keyed_one_row_per_key"),
            models.CheckConstraint(condition=~Q(key=""), name="keyed_key_not_empty"),
            models.CheckConstraint(
                condition=(
                    Q(rule="at", every_seconds__isnull=True) & ~Q(at="") & ~Q(timezone="")
                    | Q(rule="every", every_seconds__gt=0, at="", timezone="")
                    | Q(rule="once", every_seconds__isnull=True, at="", timezone="")
                ),
                name="keyed_rule_fields",
            ),
        ]
        indexes = [
            # The slot loop's due-row fetch: WHERE loop = … AND next_due <= now ORDER BY next_due.
            models.Index(fields=["loop", "next_due", "id"], name="keyed_due_idx"),
            # A last slot in the future (a clock stepped back): the slot loop's repair and the
            # doctor's futureLastSlot look for rows after now, which are none or few.
            models.Index(fields=["last_slot"], name="keyed_last_slot_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.loop} {self.key}: next due {self.next_due}"


class KeyedEventApplied(models.Model):
    """A setting or clearing event the slot loop has applied to a keyed loop's rows.

    Only the recent ones are kept: ``ScheduleState.keyed_cursor`` covers every event at or
    below it, and markers below the cursor are deleted. The markers exist because events
    commit out of id order: a cursor alone would skip an admission still in flight.
    """

    loop = models.CharField(max_length=63)
    event = models.ForeignKey("runtime.Event", on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["loop", "event"], name="keyed_event_applied_once")]

    def __str__(self) -> str:
        return f"{self.loop}: event {self.event_id}"


class LoopChangeKind(TextChoices):
    """What a ``LoopChange`` records: the slot loop saw the loop turned on (first seen, or
    re-enabled) or off (disabled or removed), or an operator paused or resumed it
    (``schedules.pausing``). The earning report reads a loop as watched from an ``enabled``
    or ``resumed`` change until the next change of any other kind."""

    ENABLED = "enabled"
    DISABLED = "disabled"
    PAUSED = "paused"
    RESUMED = "resumed"


class LoopChange(models.Model):
    """One change of a loop's enabled state, as the slot loop saw it: append-only history
    behind ``ScheduleState.enabled`` (which only says how the loop stands now).

    Written by the state sync (``schedules.state.sync_registry``) in the transaction that marks
    the loop disabled or sees it (re-)enabled, at the iteration's ``now`` (the database's
    clock). The earning report reads it to tell whether a loop was watched through its whole
    window (docs/schedules.md, "Earning auto"). A loop's history starts when the slot loop
    first saw it; migration 0008 seeded each enabled loop with one ``enabled`` change at its
    ``enabledSince``.
    """

    loop = models.CharField(max_length=63)
    at = models.DateTimeField()
    kind = models.CharField(max_length=16, choices=LoopChangeKind.choices)

    class Meta:
        ordering = ["loop", "at", "id"]
        indexes = [
            # The earning report's and the dashboard's reads: a loop's changes up to an instant.
            models.Index(fields=["loop", "at", "id"], name="loop_change_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.loop} {self.kind} at {self.at}"


class LoopPause(models.Model):
    """A loop an operator paused (docs/schedules.md, "Pausing a loop"): runtime state, not a
    registry edit. While the row exists the slot loop fires no slot of the loop (its
    effective enabled state is ``registry enabled and not paused``: ``schedules.state``).

    Written and deleted only by ``schedules.pausing`` (``pause_loop``, ``resume_loop``, the
    ``until`` expiry and the drop of a loop that left the registry), each journaled.
    ``until`` (optional) is when the slot loop resumes it by itself; ``via`` is the door
    (``cli``, ``api``, ``web``); ``note`` says why, in the operator's words.
    """

    loop = models.CharField(max_length=63, unique=True)
    paused_at = models.DateTimeField()
    paused_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    via = models.CharField(max_length=16)
    note = models.TextField()
    until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["loop"]
        permissions = [("control_loop", "Can pause, resume and trigger loops")]

    def __str__(self) -> str:
        return f"{self.loop} paused at {self.paused_at}"
