"""The operator inbox in the Django admin (docs/design.md §10).

Pending proposals come first, each with its plan; approve and reject are admin
actions with a confirmation page that shows exactly what will run, and they call the
approval service for each proposal. Interrupted runs come first among runs, with
retry and close actions (``runtime.services.interrupted``). Events, runs and the
journal are machine-owned: read-only here apart from those decisions.
"""

import json
from pathlib import Path

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Case, IntegerField, Value, When
from django.db.models.functions import Now
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from runtime import clock
from runtime.models import Event, JournalEntry, OutboxEntry, Proposal, ProposalStatus, Run, RunStatus
from runtime.services.approval import APPROVE_PERMISSION, ApprovalRefused, approve_proposal, reject_proposal
from runtime.services.interrupted import RunDecisionRefused, close_run, retry_run

#: The journal's query-string filter for one chain's story (docs/design.md §10).
CORRELATION_LOOKUP = "event__correlation_id"
#: Captured output shown on a run's page; the full file stays in the runs directory.
OUTPUT_PREVIEW_BYTES = 256 * 1024


def story_link(correlation_id: str):
    """A link to the journal filtered to one correlation, oldest first."""
    url = reverse("admin:runtime_journalentry_changelist") + "?" + urlencode({CORRELATION_LOOKUP: correlation_id})
    return format_html("<a href='{}'>{}</a>", url, correlation_id)


def pretty_json(value) -> str:
    return format_html("<pre style='white-space: pre-wrap'>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Machine-owned rows: visible to staff, never added, changed or deleted from the admin."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    list_display = ("id", "status", "definition", "loop", "event_link", "created_at", "age", "actor", "decided_by")
    list_filter = ("status", "definition", "loop")
    list_select_related = ("event", "decided_by")
    search_fields = ("event__uid", "idempotency_key", "loop")
    actions = ["approve_selected", "reject_selected"]
    fields = (
        "status", "definition", "loop", "loop_key", "event_link", "idempotency_key", "plan_view",
        "registry_digest", "created_at", "actor", "decided_by", "decided_at", "note",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        # Ages are measured on the database's clock (the one clock), read once by the listing's own query.
        return super().get_queryset(request).annotate(database_now=Now())

    def get_ordering(self, request):
        pending_first = Case(When(status=ProposalStatus.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField())
        return [pending_first.asc(), "-id"]

    def has_approve_permission(self, request):
        return request.user.has_perm("runtime.approve_proposal")

    @admin.display(description="event")
    def event_link(self, proposal):
        return proposal.event.uid

    @admin.display(description="age")
    def age(self, proposal):
        minutes = int((proposal.database_now - proposal.created_at).total_seconds() // 60)
        return f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m"

    @admin.display(description="plan")
    def plan_view(self, proposal):
        return pretty_json(proposal.plan)

    def _decide(self, request, queryset, decision: str):
        pending = list(queryset.filter(status=ProposalStatus.PENDING).select_related("event"))
        if "confirm" not in request.POST:
            return TemplateResponse(request, "admin/runtime/proposal/confirm_decision.html", {
                **self.admin_site.each_context(request),
                "title": f"{decision.capitalize()} {len(pending)} proposal(s)?",
                "decision": decision,
                "action": f"{decision}_selected",
                "proposals": [(p, json.dumps(p.plan.get("argv"), ensure_ascii=False)) for p in pending],
                "skipped": queryset.count() - len(pending),
                "selected_ids": [str(pk) for pk in queryset.values_list("pk", flat=True)],
                "opts": self.model._meta,
            })
        now = clock.database_now()
        done, refused = 0, []
        for proposal in pending:
            try:
                if decision == "approve":
                    approve_proposal(proposal.pk, user=request.user, now=now, via="admin")
                else:
                    reject_proposal(proposal.pk, user=request.user, now=now, note=request.POST.get("note", ""), via="admin")
                done += 1
            except ApprovalRefused as exc:
                refused.append(f"proposal {proposal.pk}: {exc.code} ({exc.detail})")
        verb = "approved" if decision == "approve" else "rejected"
        skipped = queryset.count() - len(pending)
        if skipped:
            self.message_user(request, f"{skipped} selected proposal(s) were not pending and were left alone.", messages.WARNING)
        if done:
            self.message_user(request, f"{done} proposal(s) {verb}.", messages.SUCCESS)
        for line in refused:
            self.message_user(request, f"Refused: {line}", messages.ERROR)
        return None

    @admin.action(permissions=["approve"], description="Approve selected pending proposals")
    def approve_selected(self, request, queryset):
        return self._decide(request, queryset, "approve")

    @admin.action(permissions=["approve"], description="Reject selected pending proposals")
    def reject_selected(self, request, queryset):
        return self._decide(request, queryset, "reject")


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Runs, interrupted ones first: each waits for an operator's retry or close (docs/design.md §8)."""

    list_display = ("id", "status", "definition", "loop", "outcome", "reason", "actor", "approved_by", "attempt", "queued_at", "finished_at")
    list_filter = ("status", "definition", "actor", "loop")
    list_select_related = ("approved_by",)
    search_fields = ("event__uid", "idempotency_key", "loop")
    actions = ["retry_selected", "close_selected"]
    fields = (
        "status", "definition", "loop", "loop_key", "event", "proposal", "idempotency_key", "actor", "approved_by",
        "attempt", "max_attempts", "timeout_seconds", "queued_at", "claimed_at", "started_at", "finished_at",
        "lease_expires_at", "worker", "outcome", "reason", "summary", "exit_code", "result_view", "plan_view",
        "registry_digest", "captured_output", "captured_errors",
    )
    readonly_fields = fields

    def get_ordering(self, request):
        interrupted_first = Case(When(status=RunStatus.INTERRUPTED, then=Value(0)), default=Value(1), output_field=IntegerField())
        return [interrupted_first.asc(), "-id"]

    def has_approve_permission(self, request):
        return request.user.has_perm(APPROVE_PERMISSION)

    def _resolve(self, request, queryset, decision: str):
        interrupted = list(queryset.filter(status=RunStatus.INTERRUPTED).select_related("event"))
        skipped = queryset.count() - len(interrupted)
        if "confirm" not in request.POST:
            return TemplateResponse(request, "admin/runtime/run/confirm_resolution.html", {
                **self.admin_site.each_context(request),
                "title": f"{decision.capitalize()} {len(interrupted)} interrupted run(s)?",
                "decision": decision,
                "action": f"{decision}_selected",
                "runs": [(r, json.dumps(r.plan.get("argv"), ensure_ascii=False)) for r in interrupted],
                "skipped": skipped,
                "selected_ids": [str(pk) for pk in queryset.values_list("pk", flat=True)],
                "opts": self.model._meta,
            })
        now = clock.database_now()
        done, refused = 0, []
        for run in interrupted:
            try:
                if decision == "retry":
                    retry_run(run.pk, user=request.user, now=now, via="admin")
                else:
                    close_run(run.pk, user=request.user, now=now, note=request.POST.get("note", ""), via="admin")
                done += 1
            except RunDecisionRefused as exc:
                refused.append(f"run {run.pk}: {exc.code} ({exc.detail})")
        if skipped:
            self.message_user(request, f"{skipped} selected run(s) were not interrupted and were left alone.", messages.WARNING)
        if done:
            self.message_user(request, f"{done} run(s) {'queued again' if decision == 'retry' else 'closed'}.", messages.SUCCESS)
        for line in refused:
            self.message_user(request, f"Refused: {line}", messages.ERROR)
        return None

    @admin.action(permissions=["approve"], description="Retry selected interrupted runs (one new attempt)")
    def retry_selected(self, request, queryset):
        return self._resolve(request, queryset, "retry")

    @admin.action(permissions=["approve"], description="Close selected interrupted runs for good")
    def close_selected(self, request, queryset):
        return self._resolve(request, queryset, "close")

    @admin.display(description="result data")
    def result_view(self, run):
        return pretty_json(run.result_data)

    @admin.display(description="plan")
    def plan_view(self, run):
        return pretty_json(run.plan)

    def _read(self, path: Path) -> str:
        runs_dir = Path(settings.FACTORY_RUNS_DIR).resolve()
        try:
            resolved = path.resolve()
            if runs_dir not in resolved.parents:
                return "(outside the runs directory)"
            with resolved.open("rb") as handle:
                data = handle.read(OUTPUT_PREVIEW_BYTES + 1)
        except OSError:
            return "(no output captured)"
        text = data[:OUTPUT_PREVIEW_BYTES].decode("utf-8", errors="replace")
        if len(data) > OUTPUT_PREVIEW_BYTES:
            text += f"\n[… first {OUTPUT_PREVIEW_BYTES} bytes shown; the whole file is {resolved}]"
        return text

    @admin.display(description="captured stdout")
    def captured_output(self, run):
        if not run.stdout_path:
            return "(none)"
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", self._read(Path(run.stdout_path)))

    @admin.display(description="captured stderr")
    def captured_errors(self, run):
        if not run.stdout_path:
            return "(none)"
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", self._read(Path(run.stdout_path).parent / "stderr.log"))


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "uid", "type", "door", "source", "subject", "admitted_at", "planning_outcome", "planning_reason", "story")
    list_filter = ("door", "type", "planning_outcome")
    search_fields = ("uid", "correlation_id", "subject")
    fields = (
        "uid", "type", "source", "subject", "door", "occurred_at", "admitted_at", "story",
        "causation_id", "payload_view", "loop", "loop_key", "slot", "planned_at", "planning_outcome", "planning_reason",
    )
    readonly_fields = fields

    @admin.display(description="correlation (its story)")
    def story(self, event):
        return story_link(event.correlation_id)

    @admin.display(description="payload")
    def payload_view(self, event):
        return pretty_json(event.payload)


@admin.register(JournalEntry)
class JournalEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "at", "action", "actor", "actor_name", "event", "proposal", "run")
    list_filter = ("action", "actor")
    list_select_related = ("event", "proposal", "run")
    search_fields = ("event__uid", "event__correlation_id", "actor_name")
    fields = ("at", "action", "actor", "actor_name", "event", "proposal", "run", "data_view")
    readonly_fields = fields

    def lookup_allowed(self, lookup, value, request=None):
        # ?event__correlation_id=ID is one chain's story (the events' "story" links).
        return lookup == CORRELATION_LOOKUP or super().lookup_allowed(lookup, value, request)

    def get_ordering(self, request):
        """A story reads oldest first; the whole journal newest first."""
        return ["id"] if CORRELATION_LOOKUP in request.GET else ["-id"]

    @admin.display(description="data")
    def data_view(self, entry):
        return pretty_json(entry.data)


@admin.register(OutboxEntry)
class OutboxEntryAdmin(ReadOnlyAdmin):
    """Chained events between their run's end and their admission (docs/design.md §8)."""

    list_display = ("id", "event_uid", "status", "duplicate", "run", "created_at", "settled_at")
    list_filter = ("status",)
    list_select_related = ("run",)
    search_fields = ("event_uid",)
    fields = ("event_uid", "run", "position", "status", "duplicate", "created_at", "settled_at", "envelope_view", "refusal_view")
    readonly_fields = fields

    @admin.display(description="envelope")
    def envelope_view(self, entry):
        return pretty_json(entry.envelope)

    @admin.display(description="refusal")
    def refusal_view(self, entry):
        return pretty_json(entry.refusal) if entry.refusal else "-"
