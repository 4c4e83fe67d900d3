"""Runs in the inbox: interrupted first, each readable from its page — output near the top,
times to the second in UTC with durations, attempts with worker and exit code, the
validated result, and links to its event, proposal, journal and the chain it caused
(docs/design.md §8, §10)."""

import json
from contextvars import ContextVar
from pathlib import Path

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Case, IntegerField, Value, When
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from lib.notes import NOTE_MAX_LENGTH
from runtime import clock
from runtime.models import TERMINAL_RUN_STATUSES, Event, JournalEntry, Run, RunStatus
from runtime.plan_text import describe_plan
from runtime.preview_text import preview_words
from runtime.services.approval import APPROVE_PERMISSION
from runtime.services.interrupted import RunDecisionRefused, close_run, retry_run

from .common import (
    ReadOnlyAdmin,
    actor_words,
    between,
    instant,
    journal_table,
    journal_url,
    pretty_json,
    row_journal,
    story_link,
)

#: One page of captured output, in bytes; ``?output_page=N`` (from 1) shows the others.
OUTPUT_PAGE_BYTES = 64 * 1024
#: The output pages the request being served asks for (``?output_page=N&errors_page=M``): the
#: admin instance is shared by every thread, so the request's choice lives in its context.
REQUESTED_PAGES: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("requested_output_pages", default=())
#: Journal actions that begin and end an attempt (``runtime.services.runs``).
ATTEMPT_START = "run_started"
ATTEMPT_ENDS = (
    "run_succeeded", "run_failed", "run_requeued", "run_abandoned", "run_interrupted", "run_lease_lost",
    "run_result_discarded",
)


def attempts(run: Run) -> list[dict]:
    """``[{attempt, worker, startedAt, endedAt, end, exitCode, reason}]`` from the run's journal,
    oldest first: each ``run_started`` and the first end that follows it (an attempt still
    going has no end)."""
    result: list[dict] = []
    for entry in row_journal(run=run, action__in=(ATTEMPT_START, *ATTEMPT_ENDS)):
        if entry.action == ATTEMPT_START:
            result.append({
                "attempt": entry.data.get("attempt"), "worker": entry.data.get("worker", ""),
                "startedAt": entry.at, "endedAt": None, "end": "", "exitCode": None, "reason": "",
            })
        elif result and not result[-1]["end"]:
            result[-1].update(
                endedAt=entry.at, end=entry.action.removeprefix("run_"),
                exitCode=entry.data.get("exitCode"), reason=entry.data.get("reason") or "",
            )
    return result


def stdout_path(run: Run) -> Path:
    """Where the run's stdout is captured: its recorded path once an attempt ended, else
    ``<runs dir>/<run id>/<captureStdout>``, where an attempt under way writes it (docs/design.md §8)."""
    if run.stdout_path:
        return Path(run.stdout_path)
    return Path(settings.FACTORY_RUNS_DIR) / str(run.pk) / (run.plan.get("captureStdout") or "stdout.log")


def read_output_page(path: Path, page: int) -> tuple[str, int]:
    """Page ``page`` (from 1) of a captured output file and the number of pages (0 when
    there is no file). Only files under ``FACTORY_RUNS_DIR`` are read."""
    runs_dir = Path(settings.FACTORY_RUNS_DIR).resolve()
    try:
        resolved = path.resolve()
        if runs_dir not in resolved.parents:
            return "(outside the runs directory)", 0
        size = resolved.stat().st_size
        pages = max(1, -(-size // OUTPUT_PAGE_BYTES))
        with resolved.open("rb") as handle:
            handle.seek((min(max(page, 1), pages) - 1) * OUTPUT_PAGE_BYTES)
            data = handle.read(OUTPUT_PAGE_BYTES)
    except OSError:
        return "(no output captured)", 0
    return data.decode("utf-8", errors="replace"), pages


def times_html(run: Run):
    """The run's instants to the second in UTC (queued, claimed, started, finished, the lease)
    and its durations, as a table: the Times fieldset, refreshed by the live fragment."""
    rows = (
        ("queued", instant(run.queued_at)), ("claimed", instant(run.claimed_at)), ("started", instant(run.started_at)),
        ("finished", instant(run.finished_at)), ("waited (queued → started)", between(run.queued_at, run.started_at)),
        ("took (started → finished)", between(run.started_at, run.finished_at)),
        ("lease held until", instant(run.lease_expires_at)),
    )
    return format_html(
        "<table class='run-times'><tbody>{}</tbody></table>",
        format_html_join("", "<tr><th scope='row'>{}</th><td>{}</td></tr>", rows),
    )


def attempts_html(run: Run):
    """The run's attempts as a table (``attempts``): the Attempts fieldset, refreshed by the live fragment."""
    rows = attempts(run)
    if not rows:
        return "(not started)"
    return format_html(
        "<table class='run-attempts'><thead><tr><th>attempt</th><th>worker</th><th>started</th><th>took</th><th>end</th>"
        "<th>exit code</th><th>reason</th></tr></thead><tbody>{}</tbody></table>",
        format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (a["attempt"], a["worker"], instant(a["startedAt"]), between(a["startedAt"], a["endedAt"]),
             a["end"] or "running", "—" if a["exitCode"] is None else a["exitCode"], a["reason"] or "—")
            for a in rows
        )),
    )


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Runs, interrupted ones first: each waits for an operator's retry or close (docs/design.md §8)."""

    list_display = ("id", "status", "definition", "loop", "outcome", "attempt", "queued", "took", "approver")
    # No loop filter in the sidebar (every loop would be a link): search, or ``?loop=<name>``.
    list_filter = ("status", "definition", "actor")
    list_select_related = ("approved_by",)
    search_fields = ("event__uid", "idempotency_key", "loop")
    actions = ["retry_selected", "close_selected"]
    fieldsets = (
        # State, outcome, reason, summary and exit code are the live panel's, above these
        # (``runtime.admin.live``, templates/admin/runtime/run/_live.html): it refreshes itself.
        (None, {"fields": ("definition", "loop", "loop_key")}),
        ("Captured output", {"fields": ("captured_output", "captured_errors")}),
        ("Times", {"fields": ("times",)}),
        ("Attempts", {"fields": ("attempt_table",)}),
        ("Result", {"fields": ("preview_seen", "result_view")}),
        ("Links", {"fields": ("event_link", "proposal_link", "story", "chain")}),
        ("Journal", {"fields": ("journal",)}),
        ("Plan", {"fields": ("plan_words", "approver", "idempotency_key", "registry_digest")}),
        ("Plan as JSON", {"fields": ("plan_view",), "classes": ("collapse",)}),
    )
    readonly_fields = tuple(f for _, options in fieldsets for f in options["fields"])
    journal_lookup = "run__id__exact"

    def get_ordering(self, request):
        interrupted_first = Case(When(status=RunStatus.INTERRUPTED, then=Value(0)), default=Value(1), output_field=IntegerField())
        return [interrupted_first.asc(), "-id"]

    def has_approve_permission(self, request):
        return request.user.has_perm(APPROVE_PERMISSION)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        token = REQUESTED_PAGES.set(tuple((key, request.GET.get(key, "1")) for key in ("output_page", "errors_page")))
        try:
            response = super().change_view(request, object_id, form_url, extra_context)
            # Rendered here, while the context holds this request's pages.
            return response.render() if isinstance(response, TemplateResponse) else response
        finally:
            REQUESTED_PAGES.reset(token)

    @admin.display(description="queued", ordering="queued_at")
    def queued(self, run):
        return instant(run.queued_at)

    @admin.display(description="took (started → finished)")
    def took(self, run):
        return between(run.started_at, run.finished_at)

    @admin.display(description="instants and durations")
    def times(self, run):
        return format_html("<div id='run-times'>{}</div>", times_html(run))

    @admin.display(description="attempts (worker, end, exit code)")
    def attempt_table(self, run):
        return format_html("<div id='run-attempts'>{}</div>", attempts_html(run))

    @admin.display(description="event")
    def event_link(self, run):
        url = reverse("admin:runtime_event_change", args=[run.event_id])
        return format_html("<a href='{}'>{}</a>", url, run.event.uid)

    @admin.display(description="proposal")
    def proposal_link(self, run):
        url = reverse("admin:runtime_proposal_change", args=[run.proposal_id])
        return format_html("<a href='{}'>proposal {}</a>", url, run.proposal_id)

    @admin.display(description="its chain's story")
    def story(self, run):
        return story_link(run.event.correlation_id)

    @admin.display(description="events it caused")
    def chain(self, run):
        # The run's outbox rows name every event it chained (``chain:<run id>:<position>``).
        caused = Event.objects.filter(uid__in=run.outbox.values("event_uid")).order_by("id").values_list("pk", "uid", "type")
        if not caused:
            return "(none)"
        return format_html_join(
            mark_safe("<br>"), "<a href='{}'>{}</a> {}",
            ((reverse("admin:runtime_event_change", args=[pk]), uid, type_) for pk, uid, type_ in caused),
        )

    @admin.display(description="entries, oldest first")
    def journal(self, run):
        return journal_table(row_journal(run=run), journal_url(self.journal_lookup, run.pk))

    @admin.display(description="preview its approver saw, beside what the run did")
    def preview_seen(self, run):
        """The preview journaled with the approval (``proposal_approved``'s ``data.preview``)
        beside the run's own outcome: ``WOULD_REAP 1`` before the click, ``REAPED 1`` after."""
        seen = JournalEntry.objects.filter(proposal_id=run.proposal_id, action="proposal_approved").values_list(
            "data", flat=True).first()
        preview = (seen or {}).get("preview")
        if preview is None:
            return "(none: no preview was made before it was approved)" if seen else "(none: nobody approved it)"
        said = preview_words(preview)
        did = f"{run.outcome}: {run.summary}" if run.outcome and run.summary else run.outcome or "(not yet)"
        return format_html(
            "<table class='preview-seen'><tbody><tr><th>previewed</th><td>{}{}</td></tr>"
            "<tr><th>the run</th><td>{}</td></tr></tbody></table>",
            said, f" (ended {preview['finishedAt']})" if preview.get("finishedAt") else "", did,
        )

    @admin.display(description="approved by")
    def approver(self, run):
        return actor_words(run.actor, run.approved_by.get_username() if run.approved_by else None)

    @admin.display(description="result data (validated against the definition's output schema)")
    def result_view(self, run):
        if run.result_data is None:
            # JSON's "null" reads as a value; say why there is none instead.
            return "none: the run has not finished" if run.status not in TERMINAL_RUN_STATUSES else "none"
        return pretty_json(run.result_data)

    @admin.display(description="plan, in words")
    def plan_words(self, run):
        return format_html(
            "<table><tbody>{}</tbody></table>",
            format_html_join("", "<tr><th>{}</th><td><code>{}</code></td></tr>", describe_plan(run.plan)),
        )

    @admin.display(description="plan")
    def plan_view(self, run):
        return pretty_json(run.plan)

    def _output(self, run, path: Path, param: str):
        try:
            page = int(dict(REQUESTED_PAGES.get()).get(param, "1"))
        except ValueError:
            page = 1
        text, pages = read_output_page(path, page)
        links = ""
        if pages > 1:
            base = reverse("admin:runtime_run_change", args=[run.pk])
            links = format_html(
                "<p>page {} of {} ({} KiB each): {}</p>", min(max(page, 1), pages), pages, OUTPUT_PAGE_BYTES // 1024,
                format_html_join(" ", "<a href='{}?{}={}'>{}</a>", ((base, param, n, n) for n in range(1, pages + 1))),
            )
        return format_html("{}<pre style='white-space: pre-wrap; max-height: 40em; overflow: auto'>{}</pre>", links, text)

    # Read where the attempt writes them, so that a page opened while a run is going shows its
    # output so far; a run not started yet has no file: "(no output captured)".
    @admin.display(description="stdout")
    def captured_output(self, run):
        return self._output(run, stdout_path(run), "output_page")

    @admin.display(description="stderr")
    def captured_errors(self, run):
        return self._output(run, stdout_path(run).parent / "stderr.log", "errors_page")

    def _resolve(self, request, queryset, decision: str):
        selected = list(queryset.select_related("event"))
        interrupted = [r for r in selected if r.status == RunStatus.INTERRUPTED]
        # Counted once, before deciding: afterwards a filtered queryset no longer holds them.
        skipped = len(selected) - len(interrupted)
        if "confirm" not in request.POST:
            return TemplateResponse(request, "admin/runtime/run/confirm_resolution.html", {
                **self.admin_site.each_context(request),
                "title": f"{decision.capitalize()} {len(interrupted)} interrupted run(s)?",
                "decision": decision,
                "action": f"{decision}_selected",
                "runs": [(r, json.dumps(r.plan.get("argv"), ensure_ascii=False)) for r in interrupted],
                "skipped": skipped,
                "selected_ids": [str(r.pk) for r in selected],
                "note_max_length": NOTE_MAX_LENGTH,
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
