"""The runtime's tables: events, proposals, runs, the journal (docs/design.md §3, §7, §8, §9).

Models own their invariants and pure computation; transitions across tables live in
``runtime.services`` (planning, approval, runs) so every change runs in one transaction.
"""

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from lib.envelope import make_envelope


class Door(models.TextChoices):
    """Who brought an event in; it decides the actor and whether auto may apply (docs/design.md §3)."""

    SCHEDULE = "schedule"
    CHAIN = "chain"
    GITHUB = "github"
    EVENTS = "events"
    INJECT = "inject"
    #: A person's "run once now" of a loop (``schedule trigger``, the loop page, the API):
    #: eventIds ``manual:<loop>:<id>``, always planned watched (docs/schedules.md, "Running a loop once now").
    OPERATOR = "operator"


class Actor(models.TextChoices):
    """Who did something recorded in the journal (docs/design.md §9)."""

    OPERATOR = "operator"
    SCHEDULE = "schedule"
    GITHUB = "github"
    EVENTS = "events"
    INJECT = "inject"
    BRIDGE = "bridge"
    CHAIN = "chain"
    SYSTEM = "system"


#: The actor each door records: the door, not the envelope's ``source``, decides (docs/design.md §3).
DOOR_ACTOR = {door: Actor(door.value) for door in Door}


class PlanningOutcome(models.TextChoices):
    PROPOSED = "PROPOSED"
    APPROVED = "APPROVED"
    NOOP = "NOOP"
    REFUSED = "REFUSED"


class ProposalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"
    #: A mutating run's attempt was cut short (a stopped worker, a lost lease); waits for an
    #: operator's retry or close (docs/design.md §8).
    INTERRUPTED = "interrupted"


#: The statuses that hold a singleton loop: an interrupted run holds it until an operator
#: resolves it, since its command may have done part of its work (docs/design.md §7.3, §8).
ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.CLAIMED, RunStatus.RUNNING, RunStatus.INTERRUPTED)
TERMINAL_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.ABANDONED)
#: The states in which a run holds its definition's barrier (docs/design.md §7, Barriers): claimed and
#: running, and ``interrupted`` — an attempt cut off midway may have done part of its work,
#: so nothing behind the same barrier starts until an operator resolves it.
BARRIER_HOLDING_STATUSES = ("claimed", "running", "interrupted")


class Event(models.Model):
    """An admitted ``factory.event/v1`` envelope; unique on ``uid`` (its ``eventId``) forever."""

    #: The envelope's ``eventId``. Not ``event_id``: in Django ``<fk>_id`` names a primary key.
    uid = models.CharField("event id", max_length=200)
    type = models.CharField(max_length=200)
    source = models.CharField(max_length=100)
    subject = models.CharField(max_length=200)
    occurred_at = models.DateTimeField()
    correlation_id = models.CharField(max_length=200)
    causation_id = models.CharField(max_length=200, null=True, blank=True)
    payload = models.JSONField()
    door = models.CharField(max_length=16, choices=Door.choices)
    admitted_at = models.DateTimeField()
    # Set only for ticks that came through the schedule door (docs/design.md §5).
    loop = models.CharField(max_length=63, null=True, blank=True)
    loop_key = models.CharField(max_length=100, null=True, blank=True)
    slot = models.DateTimeField(null=True, blank=True)
    planned_at = models.DateTimeField(null=True, blank=True)
    planning_outcome = models.CharField(max_length=16, choices=PlanningOutcome.choices, null=True, blank=True)
    planning_reason = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["-id"]
        indexes = [
            # Plain b-trees: ``db_index`` on a CharField adds a second, pattern-ops index on
            # PostgreSQL for LIKE 'prefix%', which nothing asks of these columns, and every
            # admitted event paid for it (docs/performance.md).
            # (type, id): the keyed loops read a type's events past their cursor, by id.
            models.Index(fields=["type", "id"], name="event_type_idx"),
            models.Index(fields=["correlation_id"], name="event_correlation_idx"),
            # The planner's queue: admitted events not planned yet, in admission order.
            models.Index(fields=["id"], condition=Q(planned_at__isnull=True), name="event_unplanned_idx"),
            # "Last tick of each loop" for the schedule views and the doctor.
            models.Index(fields=["loop", "loop_key", "-id"], condition=Q(loop__isnull=False), name="event_tick_idx"),
        ]
        constraints = [
            # A constraint, not ``unique=True``: on PostgreSQL that would add the pattern-ops
            # index too, one more index every admission and every planned event's update
            # writes, which only a ``LIKE 'chain:…'`` needed (docs/performance.md).
            models.UniqueConstraint(fields=["uid"], name="event_uid_unique"),
        ]

    def __str__(self) -> str:
        return self.uid

    @property
    def is_tick(self) -> bool:
        return self.door == Door.SCHEDULE and self.loop is not None

    def envelope(self) -> dict:
        """The envelope as admitted (docs/design.md §3)."""
        return make_envelope(
            event_id=self.uid,
            type=self.type,
            source=self.source,
            subject=self.subject,
            occurred_at=self.occurred_at,
            correlation_id=self.correlation_id,
            causation_id=self.causation_id,
            payload=self.payload,
        )


class Proposal(models.Model):
    """A planned event waiting for (or past) a decision; unique per held idempotency key (docs/design.md §7).

    A proposal holds its key until ``key_released_at`` is set (rejected, or its run failed,
    was abandoned or was closed): then the same key can be planned again.
    """

    event = models.OneToOneField(Event, on_delete=models.PROTECT, related_name="proposal")
    idempotency_key = models.CharField(max_length=400)
    key_released_at = models.DateTimeField(null=True, blank=True)
    loop = models.CharField(max_length=63, null=True, blank=True)
    loop_key = models.CharField(max_length=100, null=True, blank=True)
    catch_up = models.CharField(max_length=8, blank=True, default="")
    # The run's singleton key and barrier, fixed at planning so approval needs no registry lookup.
    singleton_key = models.CharField(max_length=170, null=True, blank=True)
    barrier = models.CharField(max_length=63, null=True, blank=True)
    definition = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.PENDING)
    plan = models.JSONField()
    registry_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    actor = models.CharField(max_length=16, choices=Actor.choices, blank=True, default="")
    # Indexed only where set (``proposal_decided_by_idx``): an auto-approved or pending proposal has none.
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-id"]
        permissions = [("approve_proposal", "Can approve or reject proposals")]
        indexes = [
            # Supersede and pile-up counts: pending proposals of one loop (and key).
            models.Index(fields=["loop", "loop_key", "id"], condition=Q(status="pending"), name="proposal_pending_idx"),
            # A user's decisions (the earning report, the user's deletion, which PROTECT refuses):
            # ``decided_by_id = …`` implies NOT NULL, so the partial index serves them, and the
            # proposals nobody decided — most of them, every auto one — add no entry to it.
            models.Index(fields=["decided_by"], condition=Q(decided_by__isnull=False), name="proposal_decided_by_idx"),
        ]
        constraints = [
            # One proposal holds a key at a time, whatever door or chain planned it (docs/design.md §7.2).
            models.UniqueConstraint(
                fields=["idempotency_key"], condition=Q(key_released_at__isnull=True), name="proposal_one_per_held_key"
            ),
            models.CheckConstraint(
                condition=~Q(status="pending") | Q(decided_at__isnull=True), name="proposal_pending_undecided"
            ),
            models.CheckConstraint(
                condition=~Q(actor="operator") | Q(decided_by__isnull=False), name="proposal_operator_named"
            ),
        ]

    def __str__(self) -> str:
        return f"proposal {self.pk} ({self.definition}, {self.status})"


class Run(models.Model):
    """An approved plan's execution: claimed by a worker under a lease (docs/design.md §8)."""

    proposal = models.OneToOneField(Proposal, on_delete=models.PROTECT, related_name="run")
    event = models.ForeignKey(Event, on_delete=models.PROTECT, related_name="runs")
    # The proposal's key, released with it.
    idempotency_key = models.CharField(max_length=400)
    key_released_at = models.DateTimeField(null=True, blank=True)
    definition = models.CharField(max_length=100)
    loop = models.CharField(max_length=63, null=True, blank=True)
    loop_key = models.CharField(max_length=100, null=True, blank=True)
    # Set for singleton loops: the loop name, or "<loop> <key>" for keyed loops.
    singleton_key = models.CharField(max_length=170, null=True, blank=True)
    # The definition's barrier (e.g. "merge"): one run per barrier claimed, running or interrupted.
    barrier = models.CharField(max_length=63, null=True, blank=True)
    # The queue's lane: ``loop:<loop>`` for a tick's run, else ``door:<door>`` (docs/design.md §8, fair queue).
    lane = models.CharField(max_length=80)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField()
    timeout_seconds = models.PositiveIntegerField()
    plan = models.JSONField()
    registry_digest = models.CharField(max_length=64)
    actor = models.CharField(max_length=16, choices=Actor.choices)
    # Indexed only where set (``run_approved_by_idx``): an auto run has no approver.
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    queued_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="")
    outcome = models.CharField(max_length=64, blank=True, default="")
    reason = models.CharField(max_length=200, blank=True, default="")
    summary = models.TextField(blank=True, default="")
    result_data = models.JSONField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stdout_path = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The workers' queue.
            models.Index(fields=["id"], condition=Q(status="queued"), name="run_queued_idx"),
            # The claim's check of a held barrier.
            models.Index(fields=["barrier", "status"], condition=Q(barrier__isnull=False), name="run_barrier_idx"),
            # Lease expiry sweep over claimed and running runs.
            models.Index(fields=["lease_expires_at"], condition=Q(status__in=["claimed", "running"]), name="run_leased_idx"),
            # The inbox's and the doctor's interrupted runs.
            models.Index(fields=["id"], condition=Q(status="interrupted"), name="run_interrupted_idx"),
            # A user's approvals (the user's deletion, which PROTECT refuses): as proposal_decided_by_idx.
            models.Index(fields=["approved_by"], condition=Q(approved_by__isnull=False), name="run_approved_by_idx"),
            # A loop's newest run, ticks' and "run once now"'s alike (schedules.last_run).
            models.Index(fields=["loop", "-id"], condition=Q(loop__isnull=False), name="run_loop_idx"),
        ]
        constraints = [
            # At most one active run per singleton loop (docs/design.md §7.3): two planners or an
            # approval racing a tick cannot both queue one.
            models.UniqueConstraint(
                fields=["singleton_key"],
                condition=Q(status__in=["queued", "claimed", "running", "interrupted"]),
                name="run_one_active_per_singleton",
            ),
            models.UniqueConstraint(
                fields=["idempotency_key"], condition=Q(key_released_at__isnull=True), name="run_one_per_held_key"
            ),
            # Spec §14's global one-merge barrier, in the database: a second claim behind a held
            # barrier fails whatever the claim's own check saw (docs/design.md §7, Barriers).
            models.UniqueConstraint(
                fields=["barrier"], condition=Q(status__in=BARRIER_HOLDING_STATUSES), name="run_one_per_barrier"
            ),
            models.CheckConstraint(condition=Q(attempt__lte=F("max_attempts")), name="run_attempt_within_budget"),
            models.CheckConstraint(
                condition=~Q(actor="operator") | Q(approved_by__isnull=False), name="run_operator_named"
            ),
            models.CheckConstraint(
                condition=Q(actor="operator") | Q(approved_by__isnull=True), name="run_only_operator_approves"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.definition}, {self.status})"


#: The lane of every run a person asked for with "run once now": apart from its loop's ticks.
TRIGGERED_LANE = "door:operator"


def run_lane(loop: str | None, door: str) -> str:
    """The queue lane of a run of ``loop`` (None for an event of no loop) whose event came
    through ``door``: a tick's run queues in its loop's lane, any other in its door's
    (``TRIGGERED_LANE`` for a loop run once now; docs/schedules.md, "Running a loop once now")."""
    return f"loop:{loop}" if loop and door == Door.SCHEDULE else f"door:{door}"


class QueueLane(models.Model):
    """When a lane of the run queue was last served: claims go to the lane served longest ago
    (docs/design.md §8, fair queue). ``turn`` is a counter, one higher at every claim."""

    lane = models.CharField(max_length=80, primary_key=True)
    turn = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.lane} (turn {self.turn})"


class JournalQuerySet(models.QuerySet):
    """The journal is append-only: bulk updates and deletes are refused here and in the database."""

    def update(self, **kwargs):
        raise PermissionError("the journal is append-only")

    def delete(self):
        raise PermissionError("the journal is append-only")


class JournalEntry(models.Model):
    """One recorded decision or fact: who (actor) did what (action) to which rows (docs/design.md §9)."""

    at = models.DateTimeField()
    action = models.CharField(max_length=64)
    actor = models.CharField(max_length=16, choices=Actor.choices)
    actor_name = models.CharField(max_length=150, blank=True, default="")
    event = models.ForeignKey(Event, on_delete=models.PROTECT, null=True, blank=True, related_name="journal")
    # Indexed only where set (``journal_proposal_idx``, ``journal_run_idx``): an event's
    # admission, NOOP or refusal links neither, and a burst writes thousands of those.
    proposal = models.ForeignKey(
        Proposal, on_delete=models.PROTECT, null=True, blank=True, related_name="journal", db_index=False
    )
    run = models.ForeignKey(Run, on_delete=models.PROTECT, null=True, blank=True, related_name="journal", db_index=False)
    data = models.JSONField(default=dict, blank=True)

    objects = JournalQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "journal entries"
        indexes = [
            # A proposal's or run's entries (its page, the journal's filter, PROTECT when it is
            # deleted, the database's own foreign-key check): ``proposal_id = …`` and
            # ``proposal_id IN (…)`` imply NOT NULL, so these partial indexes serve them all.
            models.Index(fields=["proposal"], condition=Q(proposal__isnull=False), name="journal_proposal_idx"),
            models.Index(fields=["run"], condition=Q(run__isnull=False), name="journal_run_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(actor="operator") | ~Q(actor_name=""), name="journal_operator_named"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} by {self.actor}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise PermissionError("the journal is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("the journal is append-only")


class OutboxStatus(models.TextChoices):
    """Where a chained event stands: waiting for the slot loop, admitted, or refused at admission."""

    PENDING = "pending"
    PUBLISHED = "published"
    REFUSED = "refused"


class OutboxEntry(models.Model):
    """A chained event written with its run's end, admitted later by the slot loop (docs/design.md §8).

    ``event_uid`` is the eventId ``chain:<run id>:<position>``; ``envelope`` is the complete
    ``factory.event/v1`` envelope to admit. ``settled_at`` is when it was published or
    refused; ``refusal`` holds the admission's ``[{code, detail}]`` for a refused row.
    """

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="outbox")
    position = models.PositiveIntegerField()
    event_uid = models.CharField("event id", max_length=200, unique=True)
    envelope = models.JSONField()
    status = models.CharField(max_length=16, choices=OutboxStatus.choices, default=OutboxStatus.PENDING)
    created_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)
    duplicate = models.BooleanField(default=False)
    refusal = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "outbox entries"
        indexes = [
            # The slot loop's publication step (runtime.services.outbox.publish_outbox, through
            # next_pending_entry) reads only the pending rows, oldest first.
            models.Index(fields=["id"], condition=Q(status="pending"), name="outbox_pending_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="outbox_one_row_per_position"),
            models.CheckConstraint(
                condition=Q(status="pending") | Q(settled_at__isnull=False), name="outbox_settled_when_done"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_uid} ({self.status})"


# Defined beside the proposal it belongs to; imported here so that Django finds it.
from .preview_model import Preview, PreviewStatus  # noqa: E402, F401
