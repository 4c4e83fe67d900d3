"""Operators deciding proposals: approve queues the run, reject records why (docs/design.md §7).

The admin inbox, ``manage.py approve/reject`` and any API call these two functions;
nothing else changes a proposal's status.
"""

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from lib.notes import check_note
from lib.refusals import Refused
from runtime.models import ACTIVE_RUN_STATUSES, Actor, Proposal, ProposalStatus, Run, RunStatus
from runtime.preview_model import Preview

from .idempotency import release_idempotency_key
from .journal import record
from .runs import queue_run

logger = logging.getLogger(__name__)

APPROVE_PERMISSION = "runtime.approve_proposal"
#: The longest note an operator may attach to a decision, in characters: it is journaled
#: with the decision and shown in the inbox.
#: The note a superseded proposal carries; ``superseded_by`` finds them by it.
SUPERSEDED_NOTE = "superseded by proposal {}"


class ApprovalRefused(Refused):
    """A decision that may not be taken: ``code`` is ``permission_denied`` (403),
    ``not_found`` (404), ``not_pending`` or ``previous_run_in_flight`` (409), ``note_too_long`` or ``invalid_note`` (400)."""

    STATUS = {
        "permission_denied": 403, "not_found": 404, "not_pending": 409, "previous_run_in_flight": 409,
        "note_too_long": 400,
        "invalid_note": 400,
    }

    def __init__(self, code: str, detail: str):
        super().__init__(code, detail, status=self.STATUS[code])


def _check_permission(user) -> None:
    if user is None or not user.is_active or not user.has_perm(APPROVE_PERMISSION):
        name = user.get_username() if user is not None else "nobody"
        raise ApprovalRefused("permission_denied", f"{name} lacks the approve_proposal permission")


def _decision_data(via: str, os_user: str | None, note: str = "", token_label: str = "") -> dict:
    """The journal's ``data`` of a decision: ``via`` (``admin``, ``cli``, ``api``), the OS user
    of a CLI decision, the note, and the label of the API token a decision came with."""
    data = {"via": via}
    if os_user:
        data["osUser"] = os_user
    if token_label:
        data["tokenLabel"] = token_label
    if note:
        data["note"] = note
    return data


def approve_proposal(
    proposal_id: int, *, user, now: datetime, note: str = "", via: str = "admin", os_user: str | None = None,
    token_label: str = "",
) -> Run:
    """Approve a pending proposal as ``user``, with an optional note, and queue its run;
    returns the run.

    ``via`` and ``os_user`` (a CLI decision) and ``token_label`` (an API decision made with a
    person's token) are journaled with the decision. Older pending proposals of the same
    loop (and key) become ``superseded``
    (``older_pending``). Raises ApprovalRefused with reason ``permission_denied``,
    ``not_found``, ``not_pending``, ``previous_run_in_flight`` (the proposal then
    stays pending) or ``note_too_long``.
    """
    _check_permission(user)
    check_note(note, ApprovalRefused)
    try:
        with transaction.atomic():
            updated = Proposal.objects.filter(pk=proposal_id, status=ProposalStatus.PENDING).update(
                status=ProposalStatus.APPROVED, actor=Actor.OPERATOR, decided_by=user, decided_at=now, note=note
            )
            proposal = Proposal.objects.select_related("event").filter(pk=proposal_id).first()
            if proposal is None:
                raise ApprovalRefused("not_found", f"there is no proposal {proposal_id}")
            if not updated:
                raise ApprovalRefused("not_pending", f"proposal {proposal_id} is {proposal.status}, not pending")
            data = _decision_data(via, os_user, note, token_label)
            preview = Preview.objects.filter(proposal_id=proposal_id).first()
            if preview is not None:
                data["preview"] = preview.seen()
            record(
                "proposal_approved", Actor.OPERATOR, at=now, actor_name=user.get_username(),
                event=proposal.event, proposal=proposal, data=data,
            )
            run = queue_run(proposal, actor=Actor.OPERATOR, approved_by=user, now=now)
            _supersede_older(proposal, user, now)
    except IntegrityError:
        holder = proposal.singleton_key and Run.objects.filter(
            singleton_key=proposal.singleton_key, status__in=ACTIVE_RUN_STATUSES
        ).values_list("pk", "status").first()
        if holder:
            todo = ": retry or close it first" if holder[1] == RunStatus.INTERRUPTED else ""
            raise ApprovalRefused(
                "previous_run_in_flight",
                f"loop {proposal.loop} has run {holder[0]} {holder[1]}{todo}; proposal {proposal_id} stays pending",
            ) from None
        raise
    logger.info(
        "proposal %s approved by %s via %s", proposal_id, user.get_username(), via,
        extra={"action": "proposal_approved", "proposal": proposal_id},
    )
    return run


def older_pending(proposal: Proposal) -> QuerySet:
    """The pending proposals that approving ``proposal`` supersedes: older ones of the same
    loop (and key), ticks' and "run once now"'s alike, except for a ``catchUp: all`` loop,
    which runs every slot; none for an event of no loop (docs/design.md §7; docs/schedules.md,
    "Running a loop once now")."""
    if not proposal.loop or proposal.catch_up == "all":
        return Proposal.objects.none()
    return Proposal.objects.filter(
        loop=proposal.loop, loop_key=proposal.loop_key, status=ProposalStatus.PENDING, id__lt=proposal.id
    )


def superseded_by(proposal: Proposal) -> list[int]:
    """The ids of the proposals that approving ``proposal`` superseded (``_supersede_older``),
    oldest first; [] when it superseded none."""
    if not proposal.loop:
        return []
    return list(
        Proposal.objects.filter(
            loop=proposal.loop, loop_key=proposal.loop_key, status=ProposalStatus.SUPERSEDED,
            note=SUPERSEDED_NOTE.format(proposal.pk),
        ).order_by("id").values_list("pk", flat=True)
    )


def _supersede_older(proposal: Proposal, user, now: datetime) -> None:
    """Running an idempotent loop once now equals running it for every stale slot (docs/design.md §7).

    A superseded proposal keeps its key: its slot is covered by the approved run, so a
    replay of that slot must stay a duplicate (docs/design.md §7.2).
    """
    older = list(older_pending(proposal).select_related("event"))
    if not older:
        return
    Proposal.objects.filter(pk__in=[p.pk for p in older], status=ProposalStatus.PENDING).update(
        status=ProposalStatus.SUPERSEDED, actor=Actor.SYSTEM, decided_at=now,
        note=SUPERSEDED_NOTE.format(proposal.pk),
    )
    for stale in older:
        record(
            "proposal_superseded", Actor.SYSTEM, at=now, event=stale.event, proposal=stale,
            data={"supersededBy": proposal.pk, "approvedBy": user.get_username()},
        )


def reject_proposal(
    proposal_id: int, *, user, now: datetime, note: str = "", via: str = "admin", os_user: str | None = None,
    token_label: str = "",
) -> Proposal:
    """Reject a pending proposal as ``user`` with an optional note; returns the proposal.

    The proposal releases its idempotency key (journaled ``idempotency_key_released``), so
    a later event with the same key is planned again (docs/design.md §7.2). Raises
    ApprovalRefused with reason ``permission_denied``, ``not_found``, ``not_pending`` or
    ``note_too_long`` (over ``NOTE_MAX_LENGTH`` characters).
    """
    _check_permission(user)
    check_note(note, ApprovalRefused)
    with transaction.atomic():
        updated = Proposal.objects.filter(pk=proposal_id, status=ProposalStatus.PENDING).update(
            status=ProposalStatus.REJECTED, actor=Actor.OPERATOR, decided_by=user, decided_at=now, note=note
        )
        proposal = Proposal.objects.select_related("event").filter(pk=proposal_id).first()
        if proposal is None:
            raise ApprovalRefused("not_found", f"there is no proposal {proposal_id}")
        if not updated:
            raise ApprovalRefused("not_pending", f"proposal {proposal_id} is {proposal.status}, not pending")
        record(
            "proposal_rejected", Actor.OPERATOR, at=now, actor_name=user.get_username(),
            event=proposal.event, proposal=proposal, data=_decision_data(via, os_user, note, token_label),
        )
        release_idempotency_key(proposal, reason="rejected", now=now)
    return proposal
