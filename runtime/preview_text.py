"""A proposal's preview and its definition's description, as the API, the listings and the
pages show them (docs/design.md §8, Previews; docs/api.md).

``preview_item`` is the JSON object every surface shares; ``would_do`` is its one line, for
the inbox's "would do" column and a notification (the summary only: never stdout or data).
"""

from collections.abc import Callable
from datetime import datetime

from lib.instants import format_instant

from .models import Proposal, ProposalStatus
from .preview_model import Preview, PreviewStatus
from .registry import Definition, RegistryInvalid, get_registry
from .services.previews import preview_duration


def _instant(value):
    return format_instant(value) if value else None


def definition_in_force(ref: str) -> Definition | None:
    """The definition ``ref`` of the registry in force, or None (gone, or no valid registry)."""
    try:
        return get_registry().definitions.get(ref)
    except RegistryInvalid:
        return None


def preview_of(proposal: Proposal) -> Preview | None:
    """The proposal's preview row (selected with it where the caller asked), or None."""
    try:
        return proposal.preview
    except Preview.DoesNotExist:
        return None


def preview_item(proposal: Proposal, *, waiting: Callable[[], int]) -> dict | None:
    """``{status, reason, detail, outcome, summary, data, stdout, exitCode, durationSeconds,
    requestedAt, requestedBy, startedAt, finishedAt, registryDigest, argv}`` (instants RFC 3339
    UTC, seconds to the millisecond), or None when the proposal's definition declares no
    preview and none was made. A pending proposal of such a definition without a row was
    left out by the queue's bound: ``not-previewed`` with reason ``queue_full`` and the
    number waiting now (``waiting()``, called only then)."""
    preview = preview_of(proposal)
    if preview is None:
        definition = definition_in_force(proposal.definition)
        if definition is None or not definition.has_preview:
            return None
        pending = proposal.status == ProposalStatus.PENDING
        return {
            **dict.fromkeys(("outcome", "summary", "data", "stdout", "exitCode", "durationSeconds", "requestedAt",
                             "requestedBy", "startedAt", "finishedAt", "registryDigest", "argv")),
            "status": PreviewStatus.NOT_PREVIEWED.value,
            "reason": "queue_full" if pending else "not_previewed",
            "detail": f"not previewed: {waiting()} waiting; ask for a preview to queue one" if pending
            else "not previewed before it was decided",
        }
    return {
        "status": preview.status,
        "reason": preview.reason,
        "detail": preview.detail,
        "outcome": preview.outcome or None,
        "summary": preview.summary or None,
        "data": preview.data,
        "stdout": preview.stdout or None,
        "exitCode": preview.exit_code,
        "durationSeconds": preview_duration(preview),
        "requestedAt": _instant(preview.requested_at),
        "requestedBy": preview.requested_by.get_username() if preview.requested_by else None,
        "startedAt": _instant(preview.started_at),
        "finishedAt": _instant(preview.finished_at),
        "registryDigest": preview.registry_digest,
        "argv": preview.argv,
    }


def would_do(item: dict | None) -> str:
    """One line of a ``preview_item``: its summary when done, else where it stands. "" without one."""
    if item is None:
        return ""
    status = item["status"]
    if status == PreviewStatus.DONE:
        return f"{item['outcome']}: {item['summary']}" if item["summary"] else item["outcome"] or "done"
    if status == PreviewStatus.FAILED:
        return f"preview failed: {item['reason']}"
    if status == PreviewStatus.RUNNING:
        return "previewing now…"
    if status == PreviewStatus.PENDING:
        return "waiting to be previewed"
    return item["detail"] or "not previewed"


def preview_age_seconds(item: dict | None, now: datetime) -> int | None:
    """Seconds since the preview ended, at ``now``; None when it has not."""
    if not item or not item.get("finishedAt"):
        return None
    finished = datetime.fromisoformat(item["finishedAt"].replace("Z", "+00:00"))
    return max(0, int((now - finished).total_seconds()))


def preview_words(seen: dict) -> str:
    """One line of a preview as an approval journaled it (``Preview.seen``): its outcome and
    summary when done, else its status and reason."""
    if seen.get("status") == PreviewStatus.DONE:
        outcome, summary = seen.get("outcome") or "done", seen.get("summary")
        return f"{outcome}: {summary}" if summary else outcome
    reason = f" ({seen['reason']})" if seen.get("reason") else ""
    return f"{seen.get('status', 'none')}{reason}"
