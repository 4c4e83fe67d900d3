"""Previews: a mutating command's dry run, run for the person about to decide (docs/design.md §8, Previews).

Planning asks for one (``queue_previews``) when it proposes a definition that declares a
preview; a person with the approve permission asks again (``request_preview``); a run
worker's preview thread takes one at a time (``claim_preview``), runs it through the
command adapter (``runtime.services.preview_execution``) and records what it found
(``finish_preview``, journaled ``proposal_previewed``).

The rules that keep previews advice and never a gate:

- only the newest pending proposal of a loop (or key) is previewed: a newer proposal drops
  the older one's waiting preview (``not-previewed``, reason ``newer_proposal``);
- at most ``FACTORY_PREVIEW_QUEUE`` previews asked for by planning wait at once; beyond it
  a proposal has no preview row and reads "not previewed: N waiting" until a person asks;
- a preview whose proposal was decided before it ran is dropped (``decided_first``);
- a person may ask again at most ``REPEAT_SECONDS`` after the last person's request for
  that proposal, and never while its preview waits or runs;
- a running preview past its deadline (its time-out plus the command's kill grace) was its
  dead worker's: it is recorded ``failed`` (``worker_lost``) by the next claim.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from lib.refusals import Refused
from runtime.adapters.fake import scripted_preview
from runtime.models import Actor, Proposal, ProposalStatus
from runtime.preview_model import OPEN_STATUSES, Preview, PreviewStatus
from runtime.registry.definitions import PREVIEW_TIMEOUT_SECONDS
from runtime.registry.model import Definition, Registry, fill_argv, preview_template

from .approval import APPROVE_PERMISSION
from .journal import record

logger = logging.getLogger(__name__)

#: How often a person may ask again for one proposal's preview, in seconds.
REPEAT_SECONDS = 10
#: Beyond a preview's time-out, how long until a row still running is surely its dead
#: worker's, in seconds: the command adapter's kill grace and its keeper's exit, and a margin.
DEADLINE_GRACE_SECONDS = 15
#: How much of a preview's stdout its row keeps, in bytes (the first of them).
PREVIEW_STDOUT_BYTES = 16 * 1024


class PreviewRefused(Refused):
    """A preview request that may not be taken: ``permission_denied`` (403), ``not_found``
    (404), ``not_pending``, ``no_preview`` or ``preview_in_progress`` (409), ``preview_too_soon`` (429)."""

    STATUS = {
        "permission_denied": 403, "not_found": 404, "not_pending": 409, "no_preview": 409,
        "preview_in_progress": 409, "preview_too_soon": 429,
    }

    def __init__(self, code: str, detail: str):
        super().__init__(code, detail, status=self.STATUS[code])


def preview_argv(plan: dict, definition: Definition, definitions) -> list[str] | None:
    """The preview's argv for ``plan``: the plan's own command template with the definition's
    flags dropped and added, filled with the plan's values (``{runId}``/``{runDir}`` left for
    the preview's run); None when the definition declares no preview or the plan's command
    is not one the preview can be derived from (a flag to drop it lacks).

    The demo's stand-in for a mutating agent (a ``fake`` plan) is previewed when its script
    declares a preview for the plan's rule (``runtime.adapters.fake.scripted_preview``,
    read against ``definitions``): then ``[]``, no command — the preview thread plays it."""
    if plan.get("adapter") == "fake":
        return [] if definition.mutating and scripted_preview(plan, definitions) is not None else None
    template = plan.get("argvTemplate")
    if not definition.has_preview or template is None:
        return None
    if any(flag not in template for flag in definition.preview_drop):
        return None
    derived = preview_template(template, definition.preview_drop, definition.preview_add)
    return None if derived == template else fill_argv(derived, plan.get("argvValues") or {})


def preview_timeout(definition: Definition) -> int:
    """A preview's time-out in seconds: the definition's ``previewTimeoutSeconds``, or for the
    demo's stand-in the default, never above the definition's own."""
    return definition.preview_timeout_seconds or min(PREVIEW_TIMEOUT_SECONDS, definition.timeout_seconds)


def queue_previews(proposed: list[tuple[int, str | None, str | None, dict]], *, registry: Registry, now: datetime) -> int:
    """Ask for the previews of newly proposed ``(proposal id, loop, key, plan)``; inside the
    planner's transaction. Returns how many were queued.

    Per loop and key only the newest proposal counts, and it drops the older proposals'
    previews that planning queued and that still wait. The queue takes the newest first,
    up to ``FACTORY_PREVIEW_QUEUE`` waiting in all; the others get no row. A chunk that
    proposes no definition with a preview costs no statement.
    """
    newest: dict[tuple, tuple[int, Definition, dict]] = {}
    for proposal_id, loop, key, plan in proposed:
        definition = registry.definitions.get(plan.get("definition", ""))
        if definition is None or not (definition.has_preview or plan.get("adapter") == "fake" and definition.mutating):
            continue
        group = (loop, key) if loop else ("", str(proposal_id))
        if group not in newest or newest[group][0] < proposal_id:
            newest[group] = (proposal_id, definition, plan)
    if not newest:
        return 0
    waiting = list(Preview.objects.filter(status=PreviewStatus.PENDING).values_list(
        "id", "proposal__loop", "proposal__loop_key", "requested_by_id"))
    dropped = [pk for pk, loop, key, by in waiting if loop and by is None and (loop, key) in newest]
    if dropped:
        Preview.objects.filter(pk__in=dropped, status=PreviewStatus.PENDING).update(
            status=PreviewStatus.NOT_PREVIEWED, reason="newer_proposal", finished_at=now,
            detail="a newer proposal of this loop is previewed instead",
        )
    room = max(0, settings.FACTORY_PREVIEW_QUEUE - (len(waiting) - len(dropped)))
    rows = []
    for proposal_id, definition, plan in sorted(newest.values(), key=lambda chosen: -chosen[0]):
        if len(rows) >= room:
            break
        argv = preview_argv(plan, definition, registry.definitions)
        if argv is None:
            continue
        rows.append(Preview(
            proposal_id=proposal_id, argv=argv, timeout_seconds=preview_timeout(definition),
            requested_at=now, registry_digest=registry.digest,
        ))
    Preview.objects.bulk_create(rows)
    if len(newest) > len(rows):
        logger.info("%s proposal(s) not previewed: %s preview(s) wait (FACTORY_PREVIEW_QUEUE=%s)",
                    len(newest) - len(rows), settings.FACTORY_PREVIEW_QUEUE - room + len(rows),
                    settings.FACTORY_PREVIEW_QUEUE, extra={"action": "previews_not_queued"})
    return len(rows)


def waiting_previews() -> int:
    """How many previews wait for a preview thread now."""
    return Preview.objects.filter(status=PreviewStatus.PENDING).count()


def request_preview(
    proposal_id: int, *, user, now: datetime, registry: Registry, via: str = "admin", os_user: str | None = None,
    token_label: str = "",
) -> Preview:
    """A person asks for the preview of pending proposal ``proposal_id`` again (or for the
    first time, when planning queued none); returns the waiting row. Journaled
    ``proposal_preview_requested`` with the person, ``via``, the OS user of a CLI request
    and the API token's label. Raises PreviewRefused (see its codes)."""
    if user is None or not user.is_active or not user.has_perm(APPROVE_PERMISSION):
        name = user.get_username() if user is not None else "nobody"
        raise PreviewRefused("permission_denied", f"{name} lacks the approve_proposal permission")
    proposal = Proposal.objects.select_related("event").filter(pk=proposal_id).first()
    if proposal is None:
        raise PreviewRefused("not_found", f"there is no proposal {proposal_id}")
    if proposal.status != ProposalStatus.PENDING:
        raise PreviewRefused("not_pending", f"proposal {proposal_id} is {proposal.status}: only a pending one is previewed")
    definition = registry.definitions.get(proposal.definition)
    argv = preview_argv(proposal.plan, definition, registry.definitions) if definition is not None else None
    if argv is None:
        raise PreviewRefused("no_preview", f"{proposal.definition} declares no preview in the registry in force")
    fields = {
        "status": PreviewStatus.PENDING, "reason": "", "detail": "", "argv": argv,
        "timeout_seconds": preview_timeout(definition), "requested_at": now, "requested_by": user,
        "started_at": None, "finished_at": None, "deadline_at": None, "worker": "", "outcome": "", "summary": "",
        "data": None, "stdout": "", "exit_code": None, "registry_digest": registry.digest,
    }
    data = {"via": via, **({"osUser": os_user} if os_user else {}), **({"tokenLabel": token_label} if token_label else {})}
    with transaction.atomic():
        current = Preview.objects.select_for_update().filter(proposal_id=proposal_id).first()
        if current is not None:
            _check_repeat(current, now)
            Preview.objects.filter(pk=current.pk).update(**fields)
        else:
            try:
                with transaction.atomic():
                    current = Preview.objects.create(proposal_id=proposal_id, **fields)
            except IntegrityError:
                raise PreviewRefused("preview_in_progress", f"proposal {proposal_id}'s preview was just asked for") from None
        record("proposal_preview_requested", Actor.OPERATOR, at=now, actor_name=user.get_username(),
               event=proposal.event, proposal=proposal, data=data)
    logger.info("preview of proposal %s asked for by %s via %s", proposal_id, user.get_username(), via,
                extra={"action": "proposal_preview_requested", "proposal": proposal_id})
    return Preview.objects.get(pk=current.pk)


def _check_repeat(current: Preview, now: datetime) -> None:
    if current.status in OPEN_STATUSES:
        raise PreviewRefused("preview_in_progress", f"proposal {current.proposal_id}'s preview is {current.status}")
    if current.requested_by_id is None:
        return  # planning's own request: a person may ask as soon as it has run
    wait = (current.requested_at + timedelta(seconds=REPEAT_SECONDS) - now).total_seconds()
    if wait > 0:
        raise PreviewRefused(
            "preview_too_soon",
            f"proposal {current.proposal_id} was previewed on request less than {REPEAT_SECONDS} s ago; "
            f"ask again in {int(wait) + 1} s",
        )


_open_sql: dict[str, str] = {}


def _any_open() -> bool:
    """Whether any preview is open: plain SQL built once per process (every worker's preview
    thread asks once a second; the queryset cost more than the answer), with the partial
    index's statuses as literals so SQLite uses ``preview_open_idx``."""
    if connection.vendor not in _open_sql:
        quote = connection.ops.quote_name
        statuses = ", ".join(f"'{status.value}'" for status in OPEN_STATUSES)
        _open_sql[connection.vendor] = (
            f"SELECT 1 FROM {quote(Preview._meta.db_table)} WHERE {quote('status')} IN ({statuses}) LIMIT 1"
        )
    with connection.cursor() as cursor:
        cursor.execute(_open_sql[connection.vendor])
        return cursor.fetchone() is not None


def claim_preview(*, worker: str, clock: Callable[[], datetime]) -> Preview | None:
    """The next waiting preview, marked ``running`` for ``worker`` until its deadline; None
    when none waits. Person-requested previews go first, then the oldest.

    When nothing is open this is one query over the open rows (a partial index) and
    ``clock`` (the database's, read once) is not called. Before claiming it drops the
    waiting previews of decided proposals and records as failed the running ones past
    their deadline (their worker died)."""
    if not _any_open():
        return None
    rows = list(Preview.objects.filter(status__in=OPEN_STATUSES).values_list(
        "id", "status", "deadline_at", "proposal__status", "requested_by_id", "timeout_seconds"))
    if not rows:
        return None
    now = clock()
    decided = [row[0] for row in rows if row[1] == PreviewStatus.PENDING and row[3] != ProposalStatus.PENDING]
    if decided:
        Preview.objects.filter(pk__in=decided, status=PreviewStatus.PENDING).update(
            status=PreviewStatus.NOT_PREVIEWED, reason="decided_first", finished_at=now,
            detail="the proposal was decided before its preview ran",
        )
    for pk, status, deadline, *_ in rows:
        if status == PreviewStatus.RUNNING and deadline < now:
            _record_lost(pk, now)
    ready = sorted((by is None, pk, timeout) for pk, status, _, proposal_status, by, timeout in rows
                   if status == PreviewStatus.PENDING and proposal_status == ProposalStatus.PENDING)
    for _, pk, timeout in ready:
        deadline = now + timedelta(seconds=timeout + DEADLINE_GRACE_SECONDS)
        if Preview.objects.filter(pk=pk, status=PreviewStatus.PENDING).update(
            status=PreviewStatus.RUNNING, started_at=now, worker=worker, deadline_at=deadline,
        ):
            return Preview.objects.select_related("proposal__event", "requested_by").get(pk=pk)
    return None


def _record_lost(pk: int, now: datetime) -> None:
    with transaction.atomic():
        if Preview.objects.filter(pk=pk, status=PreviewStatus.RUNNING, deadline_at__lt=now).update(
            status=PreviewStatus.FAILED, reason="worker_lost", finished_at=now,
            detail="its worker stopped answering before the preview ended (it died, and the command with it)",
        ):
            _journal_result(Preview.objects.select_related("proposal__event", "requested_by").get(pk=pk), now)


def finish_preview(preview: Preview, *, worker: str, now: datetime, **result) -> bool:
    """Record what a running preview found (``result``: ``status`` done or failed, and any of
    ``reason``, ``detail``, ``outcome``, ``summary``, ``data``, ``stdout``, ``exit_code``)
    and journal it (``proposal_previewed``); False when the row is no longer this worker's
    (recorded lost meanwhile)."""
    with transaction.atomic():
        if not Preview.objects.filter(pk=preview.pk, status=PreviewStatus.RUNNING, worker=worker).update(
            finished_at=now, **result,
        ):
            return False
        _journal_result(Preview.objects.select_related("proposal__event", "requested_by").get(pk=preview.pk), now)
    return True


def _journal_result(preview: Preview, now: datetime) -> None:
    proposal = preview.proposal
    record("proposal_previewed", Actor.SYSTEM, at=now, event=proposal.event, proposal=proposal, data={
        "status": preview.status, "reason": preview.reason, "outcome": preview.outcome, "summary": preview.summary,
        "exitCode": preview.exit_code, "durationSeconds": preview_duration(preview),
        "requestedBy": preview.requested_by.get_username() if preview.requested_by else None,
        "registryDigest": preview.registry_digest,
    })


def preview_duration(preview: Preview) -> float | None:
    """Seconds from start to end, to the millisecond; None while it has not both."""
    if preview.started_at is None or preview.finished_at is None:
        return None
    return round((preview.finished_at - preview.started_at).total_seconds(), 3)
