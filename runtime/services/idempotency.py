"""Idempotency keys: computed at planning, held by a proposal and its run, released on a dead end
(docs/design.md §7.2).

A key converges every door and chain on one proposal: the planner refuses a second one
for a key still held (``NOOP duplicate_idempotency_key``), and the database holds at most
one proposal and one run per held key. A proposal whose work will never happen — rejected,
or its run failed, abandoned or closed — releases its key, journaled, so a later event
with the same key is planned again; so does a run that succeeded with an outcome its
definition declares no final answer (``releaseKeyOn``: merge-scan's ``WAIT``).
"""

from datetime import datetime

from django.db import connection

from runtime.models import Actor, Event, Proposal, Run, RunStatus
from runtime.prepared import prepared_cursor
from runtime.registry import Definition, Registry, get_registry
from runtime.registry.keys import render_key

from .bulk_rows import one_of
from .journal import record

#: Why a key was released: the proposal was rejected, or its run failed (a command that
#: finished with a failure), was abandoned (its attempt budget spent), was closed by an
#: operator after an interruption, or succeeded with an outcome in ``releaseKeyOn``.
RELEASE_REASONS = ("rejected", "failed", "abandoned", "closed", "outcome")
#: What an event's key begins with when neither its slot nor a template keys it.
EVENT_KEY_PREFIX = "eventId:"
#: The longest key a proposal or run can hold (their ``idempotency_key`` columns).
KEY_MAX_LENGTH = 400


def idempotency_key(event: Event, definition: Definition) -> str:
    """The key ``event`` is planned under (docs/design.md §7.2).

    ``<loop>:<slot>`` (``<loop>:<key>:<slot>``) for ticks, always; else the definition's
    ``idempotencyKey`` template filled from the payload when every field it names is
    there (``runtime.registry.keys.render_key``); else ``eventId:<eventId>``. The prefixes
    keep the kinds apart: an outside eventId ``heartbeat:<slot>`` cannot hold a tick's key.
    """
    if event.is_tick:
        slot = event.payload["slot"]
        return f"{event.loop}:{event.loop_key}:{slot}" if event.loop_key else f"{event.loop}:{slot}"
    if definition.idempotency_key is not None:
        rendered = render_key(definition.idempotency_key, event.payload)
        if rendered is not None:
            return rendered
    return EVENT_KEY_PREFIX + event.uid


def key_held(key: str) -> bool:
    """Whether a proposal still holds ``key``."""
    return Proposal.objects.filter(idempotency_key=key, key_released_at__isnull=True).exists()


def held_keys(keys: set[str]) -> set[str]:
    """The idempotency keys among ``keys`` a proposal holds now (one query, the keys as
    ``bulk_rows.one_of``, on the partial unique index ``proposal_one_per_held_key``)."""
    if not keys:
        return set()
    quote = connection.ops.quote_name
    among, params = one_of(quote("idempotency_key"), sorted(keys))
    sql = (f"SELECT {quote('idempotency_key')} FROM {quote(Proposal._meta.db_table)} "
           f"WHERE {among} AND {quote('key_released_at')} IS NULL")
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def release_idempotency_key(proposal: Proposal, *, reason: str, now: datetime, outcome: str = "") -> bool:
    """Release the key ``proposal`` and its run hold, and journal ``idempotency_key_released``
    (on the proposal and its event) with ``{idempotencyKey, reason}`` (and ``outcome`` when
    given); call inside the transaction that records the dead end.

    ``reason`` is one of ``RELEASE_REASONS``. Returns False (and records nothing) when the
    key was released already. Raises ValueError for an unknown reason.
    """
    if reason not in RELEASE_REASONS:
        raise ValueError(f"{reason!r} is not a reason to release a key: {', '.join(RELEASE_REASONS)}")
    if not Proposal.objects.filter(pk=proposal.pk, key_released_at__isnull=True).update(key_released_at=now):
        return False
    Run.objects.filter(proposal_id=proposal.pk, key_released_at__isnull=True).update(key_released_at=now)
    record(
        "idempotency_key_released", Actor.SYSTEM, at=now, proposal=proposal,
        data={"idempotencyKey": proposal.idempotency_key, "reason": reason, **({"outcome": outcome} if outcome else {})},
    )
    return True


def key_release_after_finish(run: Run, status: str, outcome: str, *, registry: Registry | None = None) -> str | None:
    """Why ``run``'s key is released when it finishes ``status`` with ``outcome`` — ``"failed"``,
    or ``"outcome"`` for an outcome its definition (in ``registry``, default the one in force)
    lists in ``releaseKeyOn`` — or None: kept, and always for a tick's succeeded run, whose
    slot is never admitted twice, so its key is never wanted again and a sweep's every
    ``WAIT`` need not be journaled."""
    if status == RunStatus.FAILED:
        return "failed"
    if run.loop is not None:
        return None
    definition = (registry or get_registry()).definitions.get(run.definition)
    if status == RunStatus.SUCCEEDED and definition is not None and outcome in definition.release_key_on:
        return "outcome"
    return None


def release_after_finish(run: Run, status: str, outcome: str, *, now: datetime, registry: Registry | None = None) -> bool:
    """Release ``run``'s key as ``key_release_after_finish`` says, journaled; call inside the
    transaction that records the run's end. True when released."""
    reason = key_release_after_finish(run, status, outcome, registry=registry)
    if reason == "failed":
        return release_idempotency_key(run.proposal, reason="failed", now=now)
    if reason == "outcome":
        return release_idempotency_key(run.proposal, reason="outcome", now=now, outcome=outcome)
    return False
    definition = (registry or get_registry()).definitions.get(run.definition)
    if status == RunStatus.SUCCEEDED and definition is not None and outcome in definition.release_key_on:
        return release_idempotency_key(run.proposal, reason="outcome", now=now, outcome=outcome)
    return False
