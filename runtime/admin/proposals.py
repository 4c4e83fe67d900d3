"""Proposals in the inbox: pending first, decided from the list or from the proposal's own
page, always through a confirmation that says what will run (docs/design.md §7, §10)."""

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Count, IntegerField, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Now
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from lib.notes import NOTE_MAX_LENGTH
from runtime import clock
from runtime.models import Proposal, ProposalStatus, Run
from runtime.plan_text import describe_plan
from runtime.preview_model import Preview, PreviewStatus
from runtime.preview_text import preview_item, would_do
from runtime.services.approval import (
    APPROVE_PERMISSION,
    ApprovalRefused,
    approve_proposal,
    older_pending,
    reject_proposal,
    superseded_by,
)

from .common import ReadOnlyAdmin, actor_words, between, instant, journal_table, journal_url, pretty_json, row_journal
from .proposal_previews import ask_preview_view, preview_block, preview_fragment_view

DECISIONS = ("approve", "reject")
#: How many people a viewer's proposal page names to ask for a decision.
DECIDERS_SHOWN = 5


def deciders(limit: int = DECIDERS_SHOWN) -> list[str]:
    """The usernames of up to ``limit`` active people who may decide a proposal — superusers
    and those granted ``approve_proposal`` directly or through a group (the Approvers role,
    docs/team.md) — by name. One query."""
    app_label, codename = APPROVE_PERMISSION.split(".")
    granted = Q(content_type__app_label=app_label, codename=codename)
    permission = Permission.objects.filter(granted)
    people = get_user_model().objects.filter(is_active=True).filter(
        Q(is_superuser=True) | Q(user_permissions__in=permission) | Q(groups__permissions__in=permission))
    return list(people.order_by("username").values_list("username", flat=True).distinct()[:limit])


def confirmation_rows(request, proposals: list[Proposal], *, now, back: str) -> list[dict]:
    """What the confirmation page shows of each proposal: its description and what its
    preview found (``proposal_previews.preview_block``), the plan in words and the pending
    proposals approving it would supersede (``runtime.services.approval.older_pending``)."""
    return [
        {"proposal": p, "lines": describe_plan(p.plan), "preview": preview_block(request, p, now=now, back=back),
         "supersedes": list(older_pending(p).values_list("pk", flat=True))}
        for p in proposals
    ]


#: Proposals a confirmation page describes one by one; the rest of a larger selection are counted.
CONFIRM_ROWS = 100
#: A decision's past participle, as the confirmation page says it.
DECIDED = {"approve": "approved", "reject": "rejected"}

#: What an empty inbox says: what would be listed and why there is none.
NOTHING_WAITING = (
    "No proposal is waiting: a watched loop's tick, or an event whose type needs a person's approval, "
    "proposes its run here for someone with the approve permission to approve or reject. Auto loops "
    "queue their runs without one (the dashboard shows each loop's approval)."
)
#: What a list emptied by its filters or search says.
NOTHING_MATCHES = "No proposal matches these filters or this search: clear them to see every proposal."


def empty_words(cl) -> str:
    """The sentence of an empty proposal list (a Django ``ChangeList`` with no result):
    ``NOTHING_WAITING`` when no proposal is pending whatever else is chosen — no proposal at
    all, or the list narrowed to pending ones only — else ``NOTHING_MATCHES``."""
    params = {key for key in cl.params if key not in ("o", "p")}
    if not cl.full_result_count or (params <= {"status__exact"} and cl.params.get("status__exact") == "pending"):
        return NOTHING_WAITING
    return NOTHING_MATCHES


@admin.register(Proposal)
class ProposalAdmin(ReadOnlyAdmin):
    list_display = ("id", "status", "definition", "loop", "event_link", "would_do", "created", "age", "decider")
    # No loop filter in the sidebar: it lists every loop (20,000 links at 20,000 loops).
    # The search box finds a loop, and ``?loop=<name>`` narrows the list to one.
    list_filter = ("status", "definition")
    list_select_related = ("event", "decided_by", "preview")
    search_fields = ("event__uid", "idempotency_key", "loop")
    actions = ["approve_selected", "reject_selected"]
    fieldsets = (
        (None, {"fields": ("status", "definition", "loop", "loop_key", "event_link", "idempotency_key")}),
        ("What will run", {"fields": ("plan_words",)}),
        ("Decision", {"fields": ("created", "age", "decider", "decided", "note", "run_link")}),
        ("Journal", {"fields": ("journal",)}),
        ("Plan as JSON", {"fields": ("plan_view", "registry_digest"), "classes": ("collapse",)}),
    )
    readonly_fields = (
        "status", "definition", "loop", "loop_key", "event_link", "idempotency_key", "plan_words", "created", "age",
        "decider", "decided", "note", "run_link", "journal", "plan_view", "registry_digest",
    )
    change_form_template = "admin/runtime/proposal/change_form.html"
    journal_lookup = "proposal__id__exact"

    def get_queryset(self, request):
        # Ages are measured on the database's clock (the one clock), read once by the listing's own query.
        waiting = Preview.objects.filter(status=PreviewStatus.PENDING).order_by().values("status").annotate(
            n=Count("id")).values("n")
        return super().get_queryset(request).annotate(
            database_now=Now(), previews_waiting=Coalesce(Subquery(waiting[:1]), 0))

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context and "cl" in context and not context["cl"].result_count:
            context["empty_words"] = empty_words(context["cl"])
        return response

    def get_ordering(self, request):
        pending_first = Case(When(status=ProposalStatus.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField())
        return [pending_first.asc(), "-id"]

    def has_approve_permission(self, request):
        return request.user.has_perm(APPROVE_PERMISSION)

    def get_urls(self):
        decide = self.admin_site.admin_view(self.decide_view)
        return [
            path("<int:proposal_id>/decide/<str:decision>/", decide, name="runtime_proposal_decide"),
            path("<int:proposal_id>/preview/", self.admin_site.admin_view(preview_fragment_view),
                 name="runtime_proposal_preview"),
            path("<int:proposal_id>/preview/again/", self.admin_site.admin_view(ask_preview_view),
                 name="runtime_proposal_preview_again"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {"can_decide": self.has_approve_permission(request), "decisions": DECISIONS}
        # Not a number ("abc", "1%00"): no such proposal, which the admin answers as for any other.
        proposal = (Proposal.objects.select_related("preview__requested_by").filter(pk=object_id).first()
                    if str(object_id).isdigit() else None)
        if proposal is not None:
            extra["preview_block"] = preview_block(request, proposal, now=clock.database_now())
            if not extra["can_decide"] and proposal.status == ProposalStatus.PENDING:
                # Why there is no Approve/Reject button, and whom to ask (docs/team.md).
                extra["deciders"] = deciders()
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    @admin.display(description="would do")
    def would_do(self, proposal):
        item = preview_item(proposal, waiting=lambda: proposal.previews_waiting)
        return would_do(item) or "—"

    @admin.display(description="event")
    def event_link(self, proposal):
        url = reverse("admin:runtime_event_change", args=[proposal.event_id])
        return format_html("<a href='{}'>{}</a>", url, proposal.event.uid)

    @admin.display(description="run")
    def run_link(self, proposal):
        run = Run.objects.filter(proposal=proposal).values_list("pk", "status").first()
        if run is None:
            return "(none: not approved)" if proposal.status != ProposalStatus.APPROVED else "(none)"
        url = reverse("admin:runtime_run_change", args=[run[0]])
        return format_html("<a href='{}' id='run-link'>run {}</a> ({})", url, run[0], run[1])

    @admin.display(description="created", ordering="created_at")
    def created(self, proposal):
        return instant(proposal.created_at)

    @admin.display(description="decided by")
    def decider(self, proposal):
        return actor_words(proposal.actor, proposal.decided_by.get_username() if proposal.decided_by else None)

    @admin.display(description="decided", ordering="decided_at")
    def decided(self, proposal):
        return instant(proposal.decided_at)

    @admin.display(description="age")
    def age(self, proposal):
        end = proposal.decided_at if proposal.status != ProposalStatus.PENDING else proposal.database_now
        return between(proposal.created_at, end)

    @admin.display(description="plan, in words")
    def plan_words(self, proposal):
        return format_html(
            "<table class='plan-words'><tbody>{}</tbody></table>",
            format_html_join("", "<tr><th>{}</th><td><code>{}</code></td></tr>", describe_plan(proposal.plan)),
        )

    @admin.display(description="plan")
    def plan_view(self, proposal):
        return pretty_json(proposal.plan)

    @admin.display(description="entries, oldest first")
    def journal(self, proposal):
        return journal_table(row_journal(proposal=proposal), journal_url(self.journal_lookup, proposal.pk))

    def decide_view(self, request, proposal_id: int, decision: str):
        """GET: the confirmation for one proposal; POST with ``confirm``: the decision.
        Without the permission: 403, whatever the method."""
        if decision not in DECISIONS:
            raise Http404(f"no decision {decision!r}")
        if not self.has_approve_permission(request):
            raise PermissionDenied
        proposal = Proposal.objects.select_related("event").filter(pk=proposal_id).first()
        if proposal is None:
            raise Http404(f"no proposal {proposal_id}")
        page = reverse("admin:runtime_proposal_change", args=[proposal_id])
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            runs = self._apply(request, [proposal], decision)
            # Approved from its own page: follow the decision to the run's page, which updates itself.
            return HttpResponseRedirect(reverse("admin:runtime_run_change", args=[runs[0]]) if runs else page)
        if proposal.status != ProposalStatus.PENDING:
            self.message_user(request, f"Proposal {proposal_id} is {proposal.status}, not pending.", messages.WARNING)
            return HttpResponseRedirect(page)
        return self._confirmation(request, [proposal], decision, skipped=0, selected_ids=None, back=page)

    def _confirmation(self, request, pending, decision, *, skipped, selected_ids, back, through=None):
        """The page that says what deciding ``pending`` will do, its first ``CONFIRM_ROWS``
        described one by one. ``through``: the list's "select all" was used, and the form
        carries that choice and the newest proposal id it covers instead of every id."""
        shown = pending[:CONFIRM_ROWS]
        return TemplateResponse(request, "admin/runtime/proposal/confirm_decision.html", {
            **self.admin_site.each_context(request),
            "title": f"{decision.capitalize()} {len(pending)} proposal(s)?",
            "decision": decision,
            "decided": DECIDED[decision],
            "action": f"{decision}_selected",
            "rows": confirmation_rows(request, shown, now=clock.database_now(), back=request.get_full_path()),
            "more": len(pending) - len(shown),
            "skipped": skipped,
            "selected_ids": selected_ids,
            "through": through,
            "back": back,
            "note_max_length": NOTE_MAX_LENGTH,
            "opts": self.model._meta,
        })

    def _apply(self, request, pending: list[Proposal], decision: str) -> list[int]:
        """Decide each proposal; say what was done, naming and linking each queued run.
        Returns the ids of the runs queued."""
        now = clock.database_now()
        note = request.POST.get("note", "")
        done, refused, runs, covered = 0, [], [], {}
        for proposal in pending:
            if proposal.pk in covered:
                # Superseded by one approved just before, as the confirmation said: not a refusal.
                continue
            try:
                if decision == "approve":
                    runs.append((proposal.pk, approve_proposal(proposal.pk, user=request.user, now=now, note=note,
                                                               via="admin").pk))
                    covered.update(dict.fromkeys(superseded_by(proposal), proposal.pk))
                else:
                    reject_proposal(proposal.pk, user=request.user, now=now, note=note, via="admin")
                done += 1
            except ApprovalRefused as exc:
                refused.append(f"proposal {proposal.pk}: {exc.code} ({exc.detail})")
        if runs:
            links = format_html_join(", ", "<a href='{}'>run {}</a> (proposal {})", (
                (reverse("admin:runtime_run_change", args=[run]), run, proposal) for proposal, run in runs))
            self.message_user(request, format_html("{} proposal(s) approved: {} queued.", len(runs), links),
                              messages.SUCCESS)
        elif done:
            self.message_user(request, f"{done} proposal(s) rejected.", messages.SUCCESS)
        for older, newer in sorted(covered.items()):
            if older in {p.pk for p in pending}:
                self.message_user(request, f"Proposal {older} was superseded by proposal {newer}, as the confirmation "
                                           "said: its slot is covered by that run.", messages.INFO)
        for line in refused:
            self.message_user(request, f"Refused: {line}", messages.ERROR)
        return [run for _, run in runs]

    def _decide(self, request, queryset, decision: str):
        # "Select all" (Django's select_across) decides the list's whole filtered queryset. Its
        # confirmation posts that choice and the newest proposal it showed, not one field per
        # proposal (Django refuses a form of more than DATA_UPLOAD_MAX_NUMBER_FIELDS), and a
        # proposal that arrived since is left for the next decision.
        across = request.POST.get("select_across") == "1"
        confirmed = "confirm" in request.POST
        if across and confirmed:
            through = request.POST.get("through", "")
            if not through.isdigit():
                self.message_user(request, "This confirmation does not say which proposals it showed: nothing was "
                                           "decided. Select them again.", messages.ERROR)
                return None
            queryset = queryset.filter(pk__lte=int(through))
        selected = list(queryset.select_related("event"))
        pending = [p for p in selected if p.status == ProposalStatus.PENDING]
        # Counted once, before deciding: afterwards a Pending-filtered queryset no longer holds them.
        skipped = len(selected) - len(pending)
        if not confirmed:
            across = across and bool(selected)
            return self._confirmation(
                request, pending, decision, skipped=skipped,
                selected_ids=[str(p.pk) for p in selected[:1 if across else None]],
                through=max(p.pk for p in selected) if across else None,
                back=reverse("admin:runtime_proposal_changelist"),
            )
        if skipped:
            self.message_user(request, f"{skipped} selected proposal(s) were not pending and were left alone.", messages.WARNING)
        self._apply(request, pending, decision)
        return None

    @admin.action(permissions=["approve"], description="Approve selected pending proposals")
    def approve_selected(self, request, queryset):
        return self._decide(request, queryset, "approve")

    @admin.action(permissions=["approve"], description="Reject selected pending proposals")
    def reject_selected(self, request, queryset):
        return self._decide(request, queryset, "reject")
