"""The machine's own records in the inbox, read-only: events, the journal and the outbox
(docs/design.md §3, §8, §10)."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from runtime.models import Event, JournalEntry, OutboxEntry

from .common import (
    CORRELATION_LOOKUP,
    ROW_LOOKUPS,
    ReadOnlyAdmin,
    actor_words,
    instant,
    journal_table,
    journal_url,
    pretty_json,
    row_journal,
    story_link,
)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "uid", "type", "door", "admitted", "planning_outcome", "planning_reason")
    list_filter = ("door", "type", "planning_outcome")
    search_fields = ("uid", "correlation_id", "subject")
    fields = (
        "uid", "type", "source", "subject", "door", "occurred", "admitted", "story",
        "causation_id", "payload_view", "loop", "loop_key", "slot", "planned", "planning_outcome", "planning_reason",
        "journal",
    )
    readonly_fields = fields
    journal_lookup = "event__id__exact"

    @admin.display(description="occurred")
    def occurred(self, event):
        return instant(event.occurred_at)

    @admin.display(description="admitted", ordering="admitted_at")
    def admitted(self, event):
        return instant(event.admitted_at)

    @admin.display(description="planned")
    def planned(self, event):
        return instant(event.planned_at)

    @admin.display(description="journal, oldest first")
    def journal(self, event):
        return journal_table(row_journal(event=event), journal_url(self.journal_lookup, event.pk))

    @admin.display(description="correlation (its story)")
    def story(self, event):
        return story_link(event.correlation_id)

    @admin.display(description="payload")
    def payload_view(self, event):
        return pretty_json(event.payload)


def causation_depths(correlation_id: str) -> dict[str, int]:
    """How deep each event of a correlation sits in its chain: 0 for an event no other event
    of the correlation caused, else one more than its cause's. One query (``event_correlation_idx``)."""
    causes = dict(Event.objects.filter(correlation_id=correlation_id).values_list("uid", "causation_id"))
    depths: dict[str, int] = {}

    def depth(uid: str, seen: frozenset = frozenset()) -> int:
        if uid not in depths:
            cause = causes.get(uid)
            # A cause outside the correlation (or a loop in bad data) starts a chain.
            depths[uid] = depth(cause, seen | {uid}) + 1 if cause in causes and cause not in seen else 0
        return depths[uid]

    for uid in causes:
        depth(uid)
    return depths


def chain_column(depths: dict[str, int]):
    """The story's event column: each entry's event indented by its depth in the chain, so the
    story reads as a tree of causes (``↳`` for an event another one caused)."""

    def event(entry):
        if not entry.event_id:
            return "—"
        level = depths.get(entry.event.uid, 0)
        return format_html(
            "<span class='story-depth-{}' style='padding-left: {}em'>{}{}</span>",
            level, 1.5 * level, "↳ " if level else "", entry.event.uid,
        )

    event.short_description = "event (indented by cause)"
    return event


#: The characters of "via · note" the journal list shows of an entry.
LIST_NOTE_CHARS = 120


def _row_link(kind: str, row) -> str:
    """``5 approved``, linked to the row's page: the list's short form of a proposal or run."""
    if row is None:
        return "—"
    return format_html("<a href='{}'>{}</a> {}", reverse(f"admin:runtime_{kind}_change", args=[row.pk]), row.pk, row.status)


def decision_words(data: dict) -> str:
    """A decision's ``via`` and ``note`` from a journal entry's data: ``via cli · note: checked
    the diff``; ``—`` when it has neither."""
    parts = [f"via {data['via']}"] if data.get("via") else []
    if data.get("note"):
        parts.append(f"note: {data['note']}")
    return " · ".join(parts) or "—"


@admin.register(JournalEntry)
class JournalEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "at_utc", "action", "actor_view", "decision", "event", "proposal_short", "run_short")
    list_filter = ("action", "actor")
    list_select_related = ("event", "proposal", "run")
    search_fields = ("event__uid", "event__correlation_id", "actor_name")
    fields = ("at_utc", "action", "actor_view", "event", "proposal", "run", "data_view")
    readonly_fields = fields

    def lookup_allowed(self, lookup, value, request=None):
        # ?event__correlation_id=ID is one chain's story (the events' "story" links); the
        # row lookups are one proposal's, run's or event's entries (their "History").
        return lookup in (CORRELATION_LOOKUP, *ROW_LOOKUPS) or super().lookup_allowed(lookup, value, request)

    def get_list_display(self, request):
        """One correlation's story shows its events as a tree of causes (``chain_column``)."""
        correlation = request.GET.get(CORRELATION_LOOKUP)
        if correlation is None:
            return self.list_display
        return ("id", "at_utc", chain_column(causation_depths(correlation)), "action", "actor_view", "decision",
                "proposal_short", "run_short")

    def changelist_view(self, request, extra_context=None):
        correlation = request.GET.get(CORRELATION_LOOKUP)
        if correlation is not None:
            extra_context = {
                **(extra_context or {}),
                "title": f"The story of {correlation}: every event it caused, who decided and what ran, oldest first",
            }
        return super().changelist_view(request, extra_context)

    @admin.display(description="actor")
    def actor_view(self, entry):
        return actor_words(entry.actor, entry.actor_name)

    @admin.display(description="via · note")
    def decision(self, entry):
        # The list is for scanning: a long note is whole on the entry's own page.
        return Truncator(decision_words(entry.data or {})).chars(LIST_NOTE_CHARS)

    @admin.display(description="proposal")
    def proposal_short(self, entry):
        return _row_link("proposal", entry.proposal)

    @admin.display(description="run")
    def run_short(self, entry):
        return _row_link("run", entry.run)

    def get_ordering(self, request):
        """A story or a row's entries read oldest first; the whole journal newest first."""
        return ["id"] if any(key in request.GET for key in (CORRELATION_LOOKUP, *ROW_LOOKUPS)) else ["-id"]

    @admin.display(description="at", ordering="at")
    def at_utc(self, entry):
        return instant(entry.at)

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
