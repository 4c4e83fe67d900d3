"""Operators resolving interrupted runs: retry (one new attempt) or close (final) (docs/design.md §8).

A run is ``interrupted`` when an attempt of a mutating definition was cut short — its
worker stopped, or its lease was lost or expired — so its command may have done part
of its work. It holds its singleton loop until an operator with the ``approve_proposal``
permission decides. The admin inbox and ``manage.py retry_run`` / ``close_run`` call
these two functions; nothing else moves a run out of ``interrupted``.
"""

import logging
from datetime import datetime

from django.db import transaction

from lib.notes import check_note
from runtime.models import Actor, Run, RunStatus

from .approval import ApprovalRefused, _check_permission, _decision_data
from .idempotency import release_idempotency_key
from .journal import record

logger = logging.getLogger(__name__)


class RunDecisionRefused(ApprovalRefused):
    """A decision on a run that may not be taken: ``permission_denied`` (403),
    ``not_found`` (404), ``not_interrupted`` (409), ``note_too_long`` or ``invalid_note`` (400)."""

    STATUS = {"permission_denied": 403, "not_found": 404, "not_interrupted": 409, "note_too_long": 400, "invalid_note": 400}


def _interrupted_run(run_id: int) -> Run:
    """The run, locked for this transaction; raises RunDecisionRefused unless it is interrupted."""
    run = Run.objects.select_for_update().select_related("event").filter(pk=run_id).first()
    if run is None:
        raise RunDecisionRefused("not_found", f"there is no run {run_id}")
    if run.status != RunStatus.INTERRUPTED:
        raise RunDecisionRefused("not_interrupted", f"run {run_id} is {run.status}, not interrupted")
    return run


def _moved(run: Run, updated: int) -> None:
    """SQLite ignores the row lock: a decision that lost the race to another is refused."""
    if not updated:
        raise RunDecisionRefused("not_interrupted", f"run {run.pk} was decided meanwhile")


def _refused_as_run_decision(user) -> None:
    try:
        _check_permission(user)
    except ApprovalRefused as exc:
        raise RunDecisionRefused(exc.code, exc.detail) from None


def retry_run(
    run_id: int, *, user, now: datetime, via: str = "admin", os_user: str | None = None, token_label: str = ""
) -> Run:
    """Queue an interrupted run for one new attempt, as ``user``; returns the run.

    When its attempt budget is spent the budget grows by exactly one (``maxAttempts =
    attempt + 1``): the operator deliberately asks for one more attempt. Journaled as
    ``run_retried`` by ``actor: "operator"`` with the user, ``via`` and the OS user.
    Raises RunDecisionRefused: ``permission_denied``, ``not_found``, ``not_interrupted``.
    """
    _refused_as_run_decision(user)
    with transaction.atomic():
        run = _interrupted_run(run_id)
        budget = max(run.max_attempts, run.attempt + 1)
        _moved(run, Run.objects.filter(pk=run.pk, status=RunStatus.INTERRUPTED).update(
            status=RunStatus.QUEUED, max_attempts=budget, queued_at=now, worker=""
        ))
        record(
            "run_retried", Actor.OPERATOR, at=now, actor_name=user.get_username(), event=run.event, run=run,
            data={**_decision_data(via, os_user, token_label=token_label), "attempt": run.attempt, "maxAttempts": budget},
        )
    logger.info("interrupted run %s retried by %s via %s", run_id, user.get_username(), via,
                extra={"action": "run_retried", "run": run_id})
    run.refresh_from_db()
    return run


def close_run(
    run_id: int, *, user, now: datetime, note: str = "", via: str = "admin", os_user: str | None = None,
    token_label: str = "",
) -> Run:
    """Close an interrupted run for good, as ``user`` with an optional note; returns the run.

    The run becomes ``abandoned`` with reason ``closed_by_operator`` (the note is its
    summary), releases its singleton loop and its idempotency key (docs/design.md §7.2: the
    same request may be proposed again). Journaled as ``run_closed`` by ``actor:
    "operator"``, then ``idempotency_key_released`` with reason ``closed``. Raises RunDecisionRefused: ``permission_denied``, ``not_found``,
    ``not_interrupted``, ``note_too_long``.
    """
    _refused_as_run_decision(user)
    check_note(note, RunDecisionRefused)
    with transaction.atomic():
        run = _interrupted_run(run_id)
        _moved(run, Run.objects.filter(pk=run.pk, status=RunStatus.INTERRUPTED).update(
            status=RunStatus.ABANDONED, reason="closed_by_operator", summary=note, finished_at=now
        ))
        record(
            "run_closed", Actor.OPERATOR, at=now, actor_name=user.get_username(), event=run.event, run=run,
            data=_decision_data(via, os_user, note, token_label),
        )
        release_idempotency_key(run.proposal, reason="closed", now=now)
    logger.info("interrupted run %s closed by %s via %s", run_id, user.get_username(), via,
                extra={"action": "run_closed", "run": run_id})
    run.refresh_from_db()
    return run
