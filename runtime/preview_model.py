"""A proposal's preview: its mutating command's dry run, run before a person decides
(docs/design.md §4 and §8, Previews).

A preview is advice, never a gate: it holds no singleton or barrier, is no attempt, is
never retried, and nothing waits for it. Each proposal has at most one row, the latest
request's; the journal keeps every result (``proposal_previewed``).
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from lib.instants import format_instant

from .models import Proposal


class PreviewStatus(models.TextChoices):
    #: Waiting for a run worker's preview thread (at most ``FACTORY_PREVIEW_QUEUE`` from planning).
    PENDING = "pending"
    RUNNING = "running"
    #: The dry run finished and reported (its outcome may still say the command failed).
    DONE = "done"
    #: The dry run could not finish: time-out, its worker stopped or died, no command.
    FAILED = "failed"
    #: Dropped before it ran: a newer proposal of the loop is previewed, or the proposal was decided first.
    NOT_PREVIEWED = "not-previewed"


#: A preview not yet finished: waiting or running (the index ``preview_open_idx``).
OPEN_STATUSES = (PreviewStatus.PENDING, PreviewStatus.RUNNING)


class Preview(models.Model):
    """One proposal's dry run: what was asked, by whom, and what the command said it would do.

    ``argv`` is the preview's command with its plan-time values filled (``{runId}`` and
    ``{runDir}`` are the preview's own, filled when it runs); ``deadline_at`` is when a
    running preview is surely over (its time-out plus the command's kill grace): past it, a
    row still running belonged to a worker that died and is recorded failed. ``stdout`` is
    the first ``PREVIEW_STDOUT_BYTES`` of its output; ``data`` the result's ``data``.
    """

    proposal = models.OneToOneField(Proposal, on_delete=models.PROTECT, related_name="preview")
    status = models.CharField(max_length=16, choices=PreviewStatus.choices, default=PreviewStatus.PENDING)
    reason = models.CharField(max_length=64, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    argv = models.JSONField()
    timeout_seconds = models.PositiveIntegerField()
    requested_at = models.DateTimeField()
    # Null for the preview planning asks for; the person who asked again otherwise.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="")
    outcome = models.CharField(max_length=64, blank=True, default="")
    summary = models.TextField(blank=True, default="")
    data = models.JSONField(null=True, blank=True)
    stdout = models.TextField(blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    registry_digest = models.CharField(max_length=64)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The preview threads' queue and the planner's count of waiting previews.
            models.Index(fields=["id"], condition=Q(status__in=["pending", "running"]), name="preview_open_idx"),
            # A person's requests (the user's deletion, which PROTECT refuses).
            models.Index(fields=["requested_by"], condition=Q(requested_by__isnull=False), name="preview_requested_by_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "running", "done", "failed", "not-previewed"]),
                name="preview_status_known",
            ),
            models.CheckConstraint(
                condition=~Q(status="running") | Q(deadline_at__isnull=False), name="preview_running_has_deadline"
            ),
        ]

    def __str__(self) -> str:
        return f"preview of proposal {self.proposal_id} ({self.status})"

    def seen(self) -> dict:
        """What a person deciding now sees of it: ``{status, reason, outcome, summary, finishedAt}``
        (``finishedAt`` an RFC 3339 UTC instant or None); an approval journals it, so a run's
        page can show the preview its approver saw."""
        return {
            "status": self.status, "reason": self.reason, "outcome": self.outcome, "summary": self.summary,
            "finishedAt": format_instant(self.finished_at) if self.finished_at else None,
        }
