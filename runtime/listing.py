"""The JSON items of the read commands (docs/design.md §10): camelCase, as the envelope; ids are integers."""

from collections.abc import Callable

from lib.instants import format_instant

from .models import Event, JournalEntry, Proposal, Run, RunStatus
from .preview_text import definition_in_force, preview_item
from .services.previews import waiting_previews

#: Statuses in which a run's reason, if it has one, is an earlier attempt's: a newer attempt
#: waits in the queue or is going.
RETRYING_STATUSES = (RunStatus.QUEUED, RunStatus.CLAIMED, RunStatus.RUNNING)


def _instant(value):
    return format_instant(value) if value else None


def event_item(event: Event) -> dict:
    return {
        **event.envelope(),
        "id": event.pk,
        "door": event.door,
        "admittedAt": _instant(event.admitted_at),
        "planning": {"outcome": event.planning_outcome, "reason": event.planning_reason or None},
    }


def proposal_item(proposal: Proposal, *, waiting: Callable[[], int] = waiting_previews) -> dict:
    """A proposal as the API and ``proposals --json`` show it: its definition's ``description``
    in the registry in force (None when it is gone) and its ``preview``
    (``runtime.preview_text.preview_item``; ``waiting`` counts the previews waiting now)."""
    definition = definition_in_force(proposal.definition)
    return {
        "id": proposal.pk,
        "status": proposal.status,
        "eventId": proposal.event.uid,
        "loop": proposal.loop,
        "key": proposal.loop_key,
        "definition": proposal.definition,
        "idempotencyKey": proposal.idempotency_key,
        "plan": proposal.plan,
        "registryDigest": proposal.registry_digest,
        "createdAt": _instant(proposal.created_at),
        "actor": proposal.actor or None,
        "decidedBy": proposal.decided_by.get_username() if proposal.decided_by else None,
        "decidedAt": _instant(proposal.decided_at),
        "note": proposal.note,
        "description": definition.description or None if definition else None,
        "preview": preview_item(proposal, waiting=waiting),
    }


class ProposalItems:
    """``proposal_item`` for a page of proposals: the previews waiting are counted once, when
    the first proposal left out of the queue asks."""

    def __init__(self):
        self._waiting: int | None = None

    def waiting(self) -> int:
        if self._waiting is None:
            self._waiting = waiting_previews()
        return self._waiting

    def __call__(self, proposal: Proposal) -> dict:
        return proposal_item(proposal, waiting=self.waiting)


def reason_attempt(status: str, reason: str, attempt: int) -> int | None:
    """The attempt (from 1) that a run's ``reason`` belongs to; None when it has no reason.

    A reason is written when an attempt ends (or an operator closes the run), and a claim
    counts the next attempt without clearing it: while the run is claimed or running, a
    reason is the previous attempt's (``attempt - 1``); in every other status — queued
    again after a failed or interrupted attempt included — it is ``attempt``'s."""
    if not reason:
        return None
    return attempt - 1 if status in (RunStatus.CLAIMED, RunStatus.RUNNING) else attempt


def reason_words(status: str, reason: str, attempt: int) -> str:
    """A run's reason as a person reads it: ``timeout``, or ``attempt 1: timeout`` while a
    newer attempt is queued or going, so it is not read as the current one's; "" for none."""
    if not reason:
        return ""
    if status in RETRYING_STATUSES:
        return f"attempt {reason_attempt(status, reason, attempt)}: {reason}"
    return reason


def run_item(run: Run) -> dict:
    """A run as the read commands and ``/api/runs`` show it (docs/api.md); ``reasonAttempt``
    is the attempt its ``reason`` belongs to (``reason_attempt``)."""
    return {
        "id": run.pk,
        "status": run.status,
        "definition": run.definition,
        "eventId": run.event.uid,
        "loop": run.loop,
        "key": run.loop_key,
        "idempotencyKey": run.idempotency_key,
        "attempt": run.attempt,
        "maxAttempts": run.max_attempts,
        "outcome": run.outcome or None,
        "reason": run.reason or None,
        "reasonAttempt": reason_attempt(run.status, run.reason, run.attempt),
        "summary": run.summary or None,
        "actor": run.actor,
        "approvedBy": run.approved_by.get_username() if run.approved_by else None,
        "queuedAt": _instant(run.queued_at),
        "finishedAt": _instant(run.finished_at),
        "stdoutPath": run.stdout_path or None,
    }


def journal_item(entry: JournalEntry) -> dict:
    return {
        "id": entry.pk,
        "at": _instant(entry.at),
        "action": entry.action,
        "actor": entry.actor,
        "actorName": entry.actor_name or None,
        "eventId": entry.event.uid if entry.event_id else None,
        "proposalId": entry.proposal_id,
        "runId": entry.run_id,
        "data": entry.data,
    }
