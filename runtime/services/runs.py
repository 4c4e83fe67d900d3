"""Run state transitions: claim under a lease, start, renew, finish, fail or interrupt an attempt (docs/design.md §8).

Each transition is one compare-and-swap ``UPDATE … WHERE status = old`` so a worker
that lost its lease (expired, then claimed by another) cannot overwrite the newer state.
No transaction here is held across a subprocess or any other I/O.
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from runtime.adapters.base import RunResult
from runtime.adapters.command import KILL_GRACE_SECONDS
from runtime.clock import instant_of, now_sql
from runtime.models import Actor, Event, Proposal, Run, RunStatus, run_lane
from runtime.prepared import instant_param
from runtime.preview_model import OPEN_STATUSES as OPEN_PREVIEW_STATUSES
from runtime.preview_model import Preview
from runtime.registry import Registry, get_registry

from .barriers import barrier_free_sql
from .chains import ChainBroken, chain_envelopes
from .idempotency import key_release_after_finish, release_after_finish, release_idempotency_key
from .journal import entry_values, record, record_values
from .outbox import write_outbox
from .queue import next_claimable, serve_lane
from .run_statements import (
    broke_barrier_constraint,
    claim_in_one_statement,
    finish_in_one_statement,
    start_in_one_statement,
)

logger = logging.getLogger(__name__)

LEASED_STATUSES = (RunStatus.CLAIMED, RunStatus.RUNNING)


#: What a run copies from its approved proposal, by attname.
COPIED_FROM_PROPOSAL = (
    "event_id", "idempotency_key", "definition", "loop", "loop_key", "singleton_key", "barrier", "plan",
    "registry_digest",
)


def run_fields(proposal: Mapping, *, door: str, actor: Actor | str, now: datetime) -> dict:
    """The fields (by attname, ``proposal_id`` and ``approved_by`` aside) of the queued run of
    an approved proposal, from ``proposal``'s fields (``COPIED_FROM_PROPOSAL`` at least) and
    its event's ``door``. ``new_run`` builds the instance; batched planning inserts these
    as rows (``bulk_rows.insert_rows``)."""
    plan = proposal["plan"]
    return {
        **{name: proposal[name] for name in COPIED_FROM_PROPOSAL},
        "lane": run_lane(proposal["loop"], door),
        "max_attempts": plan["maxAttempts"],
        "timeout_seconds": plan["timeoutSeconds"],
        "actor": actor,
        "queued_at": now,
    }


def run_queued_entry(run: Mapping, *, run_id: int, now: datetime, actor_name: str = "") -> tuple:
    """The ``run_queued`` journal row (``journal.entry_values``, for ``record_values``) of the
    saved run ``run_id`` whose fields ``run`` maps (``run_fields``' and ``proposal_id``): by
    its actor, naming the approver ``actor_name`` (empty for a door's auto-approval)."""
    return entry_values(
        "run_queued", run["actor"], at=now, actor_name=actor_name, event_id=run["event_id"],
        proposal_id=run["proposal_id"], run_id=run_id, data={"definition": run["definition"]},
    )


def queue_run(proposal: Proposal, *, actor: Actor, approved_by, now: datetime) -> Run:
    """Create the queued run of an approved proposal and journal it.

    Raises IntegrityError when the proposal's singleton loop already has an active run
    (the database constraint ``run_one_active_per_singleton``). Call inside a transaction.
    """
    copied = {name: getattr(proposal, name) for name in COPIED_FROM_PROPOSAL}
    fields = run_fields(copied, door=proposal.event.door, actor=actor, now=now)
    run = Run(proposal=proposal, approved_by=approved_by, **fields)
    run.save(force_insert=True)
    actor_name = approved_by.get_username() if approved_by else ""
    record_values([run_queued_entry({**fields, "proposal_id": proposal.pk}, run_id=run.pk, now=now, actor_name=actor_name)])
    return run


def claim_next_run(*, worker: str, now: datetime, lease_seconds: int) -> Run | None:
    """Claim the next queued run for ``worker`` with a lease until ``now + lease_seconds``.

    Returns the claimed run (attempt already counted) or None when no run is claimable.
    The next run is the oldest of the lane served longest ago (``runtime.services.queue``);
    a run whose barrier another run holds waits (``runtime.services.barriers``).
    PostgreSQL picks, locks (``SELECT … FOR UPDATE SKIP LOCKED``), claims, serves the lane and
    journals in one statement (``run_statements.claim_in_one_statement``) and tries again when
    another worker took the same barrier first; SQLite, which ignores row locks, claims
    with a compare-and-swap update and tries the next row when another worker won.
    """
    lease_until = now + timedelta(seconds=lease_seconds)
    if connection.vendor == "postgresql":
        while True:
            try:
                with transaction.atomic(durable=True):
                    return claim_in_one_statement(worker=worker, now=instant_param(now),
                                                  lease_until=instant_param(lease_until))
            except IntegrityError as exc:
                if not broke_barrier_constraint(exc):
                    raise
    while True:
        found = next_claimable(lock=False)
        if found is None:
            return None
        run_id, lane = found
        with transaction.atomic():
            run = _claim_row(run_id, worker=worker, now=now, lease_until=lease_until)
            if run is not None:
                serve_lane(lane)
                return _journal_claim(run, worker, now)


def _claim_row(run_id: int, *, worker: str, now: datetime, lease_until: datetime) -> Run | None:
    """SQLite, which ignores row locks: mark run ``run_id`` claimed by ``worker`` (its attempt
    counted, leased until ``lease_until``) only while it is still queued and no other run holds
    its barrier, and return it as stored, in one compare-and-swap ``UPDATE … RETURNING``; None
    when another worker won. (PostgreSQL claims in ``run_statements.claim_in_one_statement``.)"""
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(Run._meta.db_table)} AS run SET status = %s, attempt = run.attempt + 1, claimed_at = %s,"
        f" lease_expires_at = %s, worker = %s WHERE run.id = %s AND run.status = '{RunStatus.QUEUED.value}'"
        f" AND {barrier_free_sql('run')} RETURNING *"
    )
    params = [RunStatus.CLAIMED.value, instant_param(now), instant_param(lease_until), worker, run_id]
    return next(iter(Run.objects.raw(sql, params)), None)


def _journal_claim(run: Run, worker: str, now: datetime) -> Run:
    record("run_claimed", Actor.SYSTEM, at=now, run=run, data={"worker": worker, "attempt": run.attempt})
    return run


def start_run(run: Run, *, worker: str, now: datetime) -> bool:
    """``claimed → running`` at ``now``, journaled ``run_started`` with ``{worker, attempt}``;
    False when the lease was lost in between.

    On PostgreSQL one statement, prepared (the compare-and-swap and the entry:
    ``run_statements``): one round trip instead of four (docs/performance.md, "Statements
    per operation"); on SQLite the update and the entry in one transaction."""
    if connection.vendor == "postgresql":
        return start_in_one_statement(run, worker=worker, now=now)
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, status=RunStatus.CLAIMED, worker=worker).update(
            status=RunStatus.RUNNING, started_at=now
        ):
            return False
        record("run_started", Actor.SYSTEM, at=now, run=run, data={"worker": worker, "attempt": run.attempt})
    return True


def renew_lease(run_id: int, *, worker: str, now: datetime, lease_seconds: int) -> bool:
    """Extend the lease of a run this worker holds; False when it holds it no longer."""
    return bool(
        Run.objects.filter(pk=run_id, worker=worker, status__in=LEASED_STATUSES).update(
            lease_expires_at=now + timedelta(seconds=lease_seconds)
        )
    )


def finish_run(run: Run, result: RunResult, *, worker: str, now: datetime, registry: Registry | None = None) -> bool:
    """Record a command that finished at ``now``: ``running → succeeded | failed`` (final either way).

    A finished failure is never retried: a mutating command is not re-run because it
    failed (docs/design.md §8). A succeeded run's chain — the edges of ``(definition, outcome)``
    in ``registry`` (default: the one in force) — is resolved first, outside the
    transaction, and written as outbox rows in the same transaction as the run's end.
    Only succeeded runs chain: a failed one (a non-zero exit, an output contract
    violation) emits nothing. A chain whose pointer finds nothing emits nothing at all,
    leaves the run's status as its result says with reason ``chain_broken``, and is
    journaled as ``chain_broken``. A failed run, or one that succeeded with an outcome its
    definition lists in ``releaseKeyOn``, releases its idempotency key (docs/design.md §7.2).
    On PostgreSQL a quiet finish — succeeded, chaining nothing, releasing no key — is one
    statement (``run_statements``). Returns False when this worker no longer held the run.
    """
    status = RunStatus.SUCCEEDED if result.succeeded else RunStatus.FAILED
    chaining = registry or get_registry()
    chains = status == RunStatus.SUCCEEDED and bool(chaining.edges_for(run.definition, result.outcome))
    quiet = not chains and status == RunStatus.SUCCEEDED and key_release_after_finish(
        run, status, result.outcome, registry=chaining) is None
    broken = None
    if quiet and connection.vendor == "postgresql":
        finished = finish_in_one_statement(run, result, worker=worker, now=now)
    else:
        finished, broken = _finish_recorded(run, result, status, chains, worker=worker, now=now, registry=chaining)
    if not finished:
        logger.warning(
            "run %s finished after its lease was lost; result discarded", run.pk,
            extra={"action": "run_result_discarded", "run": run.pk},
        )
        return False
    logger.info(
        "run %s %s: %s %s", run.pk, status, result.outcome, result.reason,
        extra={"action": f"run_{status}", "run": run.pk},
    )
    if broken:
        logger.error(
            "run %s (%s %s): chain broken, nothing emitted: %s", run.pk, run.definition, result.outcome, broken,
            extra={"action": "chain_broken", "run": run.pk},
        )
    return True


def _finish_recorded(run: Run, result: RunResult, status: str, chains: bool, *, worker: str, now: datetime,
                     registry: Registry) -> tuple[bool, ChainBroken | None]:
    """``finish_run`` through the ORM: the chain resolved (the run's event read only when it
    chains), then the run's end, its entries, the key's release and the outbox rows in one
    transaction. ``(False, None)`` when the lease was lost, else ``(True, the chain's
    ChainBroken or None)``."""
    envelopes: list[dict] = []
    broken: ChainBroken | None = None
    if chains:
        event = Event.objects.get(pk=run.event_id)
        try:
            envelopes = chain_envelopes(
                run, event, outcome=result.outcome, summary=result.summary, data=result.data,
                registry=registry, now=now,
            )
        except ChainBroken as exc:
            broken = exc
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, worker=worker).update(
            status=status,
            finished_at=now,
            lease_expires_at=None,
            outcome=result.outcome,
            reason="chain_broken" if broken else result.reason,
            summary=result.summary,
            result_data=result.data,
            exit_code=result.exit_code,
            stdout_path=result.stdout_path,
        ):
            return False, None
        record(
            f"run_{status}", Actor.SYSTEM, at=now, run=run,
            data={"outcome": result.outcome, "reason": result.reason, "exitCode": result.exit_code, **result.extra},
        )
        if broken:
            record("chain_broken", Actor.CHAIN, at=now, run=run, data={"outcome": result.outcome, "problems": broken.problems})
        release_after_finish(run, status, result.outcome, now=now, registry=registry)
        write_outbox(run, envelopes, now=now)
    return True, broken


def renewal_interval(lease_seconds: int) -> float:
    """How often a worker renews a lease of ``lease_seconds``: a third of it, at least a second."""
    return max(1.0, lease_seconds / 3)


def expiry_margin(lease_seconds: int) -> timedelta:
    """How long past its lease's end a run must be before the sweep takes it back (docs/design.md §8).

    Longer than the renewal interval plus the command's kill grace: a worker that cannot
    renew kills its command when the lease would end, and that command is dead — TERM,
    then KILL after ``KILL_GRACE_SECONDS`` — before the run can be claimed again.
    """
    return timedelta(seconds=renewal_interval(lease_seconds) + KILL_GRACE_SECONDS)


def fail_attempt(
    run_id: int, *, reason: str, now: datetime, expected_status=LEASED_STATUSES, worker: str | None = None,
    interrupted: bool = False, detail: str = "",
) -> str | None:
    """Count a failed attempt (lease expired, time-out, a stopped worker): requeue within budget,
    else abandon — except that an ``interrupted`` attempt of a mutating definition (its
    command may have done part of its work) makes the run ``interrupted``, for an
    operator to retry or close (docs/design.md §8). ``detail`` (what failed: a path and an
    OS error) is journaled with the reason and logged.

    An abandoned run releases its idempotency key (docs/design.md §7.2). Returns the new
    status (``queued``, ``abandoned`` or ``interrupted``), or None when
    the run was no longer in ``expected_status`` or held by ``worker`` (someone else
    moved it first).
    """
    with transaction.atomic():
        run = Run.objects.filter(pk=run_id).first()
        if run is None or run.status not in expected_status or (worker is not None and run.worker != worker):
            return None
        if interrupted and run.plan.get("mutating", True):
            new_status = RunStatus.INTERRUPTED
        else:
            new_status = RunStatus.QUEUED if run.attempt < run.max_attempts else RunStatus.ABANDONED
        # An interrupted run keeps the worker that ran it: the operator deciding its fate asks where it ran.
        changes = dict(status=new_status, lease_expires_at=None, reason=reason,
                       worker=run.worker if new_status == RunStatus.INTERRUPTED else "")
        if new_status == RunStatus.ABANDONED:
            changes["finished_at"] = now
        if not Run.objects.filter(pk=run.pk, status=run.status, attempt=run.attempt, worker=run.worker).update(**changes):
            return None
        action = {RunStatus.QUEUED: "run_requeued", RunStatus.ABANDONED: "run_abandoned"}.get(new_status, "run_interrupted")
        data = {"reason": reason, "attempt": run.attempt, "maxAttempts": run.max_attempts}
        if detail:
            data["detail"] = detail
        if new_status == RunStatus.INTERRUPTED:
            data["worker"] = run.worker
        record(action, Actor.SYSTEM, at=now, run=run, data=data)
        if new_status == RunStatus.ABANDONED:
            release_idempotency_key(run.proposal, reason="abandoned", now=now)
    log = logger.warning if new_status == RunStatus.QUEUED else logger.error
    log(
        "run %s attempt %s/%s failed (%s%s): %s", run.pk, run.attempt, run.max_attempts, reason,
        f": {detail}" if detail else "", new_status, extra={"action": "run_attempt_failed", "run": run.pk},
    )
    return new_status


def record_lease_lost(run_id: int, *, worker: str, attempt: int, now: datetime) -> None:
    """Journal that ``worker`` found its lease gone and killed its command (``run_lease_lost``)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is not None:
        record("run_lease_lost", Actor.SYSTEM, at=now, run=run, data={"worker": worker, "attempt": attempt})


_waiting_sql: dict[str, str] = {}


@dataclass(frozen=True)
class WaitingWork:
    """An idle worker's question, answered: the database's instant ``now`` (timezone-aware
    UTC), whether a run is ``queued``, whether a leased run is past its lease by the margin
    (``expired``), and whether a preview is open (``previews``: pending or running)."""

    now: datetime
    queued: bool
    expired: bool
    previews: bool


def waiting_work(*, margin: timedelta | None = None, clock: Callable[[], datetime] | None = None) -> WaitingWork:
    """What a worker may have to do, at the database's instant: one statement of plain SQL,
    built once per process, that reads the clock, ``run_queued_idx``, the earliest lease end
    of ``run_leased_idx`` and ``preview_open_idx`` (their statuses as literals, so SQLite
    uses them). An idle worker asks it once a second, and its preview thread takes its
    answer instead of asking for itself (``ops.worker``). ``expired`` is as
    ``expire_leases`` at ``now`` and ``margin`` (default
    ``expiry_margin(FACTORY_LEASE_SECONDS)``) sees it; ``queued`` may be true when the claim
    then finds nothing (a run held at its barrier), never the reverse. ``clock``, when given,
    is the instant's source instead of the statement's reading (a caller's pinned clock, as
    ``claim_preview`` takes one)."""
    if margin is None:
        margin = expiry_margin(settings.FACTORY_LEASE_SECONDS)
    if connection.vendor not in _waiting_sql:
        quote = connection.ops.quote_name
        table, status = quote(Run._meta.db_table), quote("status")
        leased = ", ".join(f"'{value.value}'" for value in LEASED_STATUSES)
        open_previews = ", ".join(f"'{value.value}'" for value in OPEN_PREVIEW_STATUSES)
        _waiting_sql[connection.vendor] = (
            f"SELECT {now_sql()}, EXISTS (SELECT 1 FROM {table} WHERE {status} = '{RunStatus.QUEUED.value}'),"
            f" (SELECT MIN({quote('lease_expires_at')}) FROM {table} WHERE {status} IN ({leased})),"
            f" EXISTS (SELECT 1 FROM {quote(Preview._meta.db_table)} WHERE {status} IN ({open_previews}))"
        )
    with connection.cursor() as cursor:
        cursor.execute(_waiting_sql[connection.vendor])
        now, queued, earliest_end, previews = cursor.fetchone()
    now = instant_of(now) if clock is None else clock()
    expired = earliest_end is not None and instant_of(earliest_end) < now - margin
    return WaitingWork(now, bool(queued), expired, bool(previews))


def expire_leases(*, now: datetime, margin: timedelta | None = None) -> int:
    """Take back every claimed or running run whose lease ended more than ``margin`` (default
    ``expiry_margin(FACTORY_LEASE_SECONDS)``) before ``now``; returns how many.

    Each is an interrupted attempt: a mutating run becomes ``interrupted``, any other is
    requeued within its budget, else abandoned (``fail_attempt``).
    """
    if margin is None:
        margin = expiry_margin(settings.FACTORY_LEASE_SECONDS)
    expired = list(
        Run.objects.filter(status__in=LEASED_STATUSES, lease_expires_at__lt=now - margin).values_list("id", flat=True)
    )
    return sum(1 for run_id in expired if fail_attempt(run_id, reason="lease_expired", now=now, interrupted=True))
