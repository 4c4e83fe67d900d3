"""What every page of the inbox shares: read-only machine rows, instants to the second in
UTC, durations, JSON shown as text, and a row's journal entries (docs/design.md §10)."""

import json
from datetime import UTC, datetime

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.utils.text import capfirst

from runtime.models import JournalEntry

#: The journal's query-string filter for one chain's story (docs/design.md §10).
CORRELATION_LOOKUP = "event__correlation_id"
#: The journal's query-string filters for one proposal's, run's or event's entries.
ROW_LOOKUPS = ("proposal__id__exact", "run__id__exact", "event__id__exact")
#: The most journal entries a proposal's or run's page shows; the journal link has them all.
SHOWN_JOURNAL_ENTRIES = 200


def instant(value: datetime | None, *, relative: bool = True) -> str:
    """``<time datetime="2026-11-30T21:00:01Z" title="2026-11-30 21:00:01 UTC">…</time>``, or ``—``:
    to the second, its text in the reader's zone when one is active (``ops.web.zones``:
    ``2026-12-01 08:00:01 +11``), else in UTC (``2026-11-30 21:00:01 UTC``), which the page's
    script turns into the browser's zone (docs/web.md, "Times in the reader's zone").
    ``relative=False`` (``data-relative="off"``) where the words around it already say how long
    ago it was: the script then adds no "(3 min ago)"."""
    if value is None:
        return "—"
    utc = value.astimezone(UTC)
    if timezone.get_current_timezone_name() == "UTC":
        text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    else:
        text = utc.astimezone(timezone.get_current_timezone()).strftime("%Y-%m-%d %H:%M:%S %Z")
    return format_html('<time datetime="{}" title="{}"{}>{}</time>', utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       utc.strftime("%Y-%m-%d %H:%M:%S UTC"), "" if relative else mark_safe(' data-relative="off"'), text)


def duration(seconds: float | None) -> str:
    """``45 s``, ``3 m 05 s``, ``2 h 07 m``, ``3 d 4 h``; ``—`` for None. Negative reads as 0 s."""
    if seconds is None:
        return "—"
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} m"
    if minutes:
        return f"{minutes} m {secs:02d} s"
    return f"{secs} s"


def between(start: datetime | None, end: datetime | None) -> str:
    """How long from ``start`` to ``end`` (a run's wait or work): under a minute to the tenth
    of a second (``0.4 s``, ``45.9 s``: a quick run must not read ``0 s``), else as
    ``duration``; ``—`` when either is missing."""
    if not (start and end):
        return "—"
    return seconds_text((end - start).total_seconds())


def seconds_text(seconds: float) -> str:
    """``duration`` to the tenth of a second under a minute (``0.4 s``); a quick run that still
    took time reads ``< 0.1 s`` (not ``0.0 s``, which said it took none); zero or negative reads ``0.0 s``."""
    # Rounded first, so 59.96 s reads "1 m 00 s", never "60.0 s".
    tenths = round(max(0.0, seconds), 1)
    if tenths == 0 and seconds > 0:
        return "< 0.1 s"
    return f"{tenths:.1f} s" if tenths < 60 else duration(tenths)


def actor_words(actor: str, name: str | None) -> str:
    """Who acted, as a person reads it: ``operator (alice)`` — the kind of actor, then the
    person in brackets, so a user named ``operator`` reads ``operator (operator)``, not
    ``operator operator`` — or the actor alone (``schedule``, ``system``); ``—`` for none."""
    if not actor:
        return name or "—"
    return f"{actor} ({name})" if name else actor


def story_link(correlation_id: str):
    """A link to the journal filtered to one correlation, oldest first."""
    url = reverse("admin:runtime_journalentry_changelist") + "?" + urlencode({CORRELATION_LOOKUP: correlation_id})
    return format_html("<a href='{}'>{}</a>", url, correlation_id)


def journal_url(lookup: str, pk: int) -> str:
    """The journal filtered to one row's entries, oldest first (``lookup`` from ``ROW_LOOKUPS``)."""
    return reverse("admin:runtime_journalentry_changelist") + "?" + urlencode({lookup: pk})


def pretty_json(value) -> str:
    return format_html("<pre style='white-space: pre-wrap'>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


def journal_table(entries, more_url: str):
    """An HTML table of journal entries (oldest first): instant, action, actor, data; a link
    to the whole list when there are more than ``SHOWN_JOURNAL_ENTRIES``."""
    rows = list(entries[: SHOWN_JOURNAL_ENTRIES + 1])
    if not rows:
        return "(no journal entries)"
    body = format_html_join(
        "", "<tr><td>{}</td><td><a href='{}'>{}</a></td><td>{}</td><td><code>{}</code></td></tr>",
        (
            (instant(e.at), reverse("admin:runtime_journalentry_change", args=[e.pk]), e.action,
             actor_words(e.actor, e.actor_name), json.dumps(e.data, ensure_ascii=False, sort_keys=True))
            for e in rows[:SHOWN_JOURNAL_ENTRIES]
        ),
    )
    more = format_html("<p><a href='{}'>all entries</a></p>", more_url) if len(rows) > SHOWN_JOURNAL_ENTRIES else ""
    return format_html(
        "<table class='journal'><thead><tr><th>at</th><th>action</th><th>actor</th><th>data</th></tr></thead>"
        "<tbody>{}</tbody></table>{}", body, more,
    )


def row_journal(**lookup):
    """A row's journal entries, oldest first."""
    return JournalEntry.objects.filter(**lookup).order_by("id")


def list_title(model) -> str:
    """A model's change list title: its plural name, capitalised (``Proposals``). Pure."""
    return capfirst(model._meta.verbose_name_plural)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Machine-owned rows: visible to staff, never added, changed or deleted from the admin.

    Their history is the journal, not the admin's log: "History" opens the row's journal
    entries (``journal_lookup``, one of ``ROW_LOOKUPS``)."""

    journal_lookup: str | None = None

    def changelist_view(self, request, extra_context=None):
        # "Proposals", "Runs", "Journal entries": what the list is, not the admin's "Select … to view".
        return super().changelist_view(request, {"title": list_title(self.model), **(extra_context or {})})

    def response_action(self, request, queryset):
        """The list's action on the ticked rows. A selection naming a row that is not a number (a
        forged or damaged form) does nothing and says so: Django's own answer is a 500."""
        if not all(value.isascii() and value.isdigit() for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)):
            self.message_user(request, "The selection names a row that is not a number: nothing was done. "
                                       "Select the rows again.", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)

    def history_view(self, request, object_id, extra_context=None):
        if self.journal_lookup is None:
            return super().history_view(request, object_id, extra_context)
        if not str(object_id).isdigit():
            raise Http404(f"no {self.model._meta.verbose_name} {object_id!r}")
        return redirect(journal_url(self.journal_lookup, int(object_id)))

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
