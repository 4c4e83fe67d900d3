"""Template filters and tags of the operator's pages (docs/web.md)."""

from zoneinfo import ZoneInfo

from django import template

from runtime import clock
from runtime.admin.common import between, instant
from runtime.admin.live import inbox_watch, run_now
from runtime.models import Proposal, ProposalStatus

from ..schedule_text import scalar_text
from ..web import words

register = template.Library()


@register.filter
def instant_time(value):
    """An instant to the second as a ``<time>`` in the reader's zone (``runtime.admin.common.instant``; ``—`` for None)."""
    return instant(value)


@register.filter
def in_loop_zone(value, zone):
    """An instant as a time-of-day loop's own wall clock: ``2026-12-07 09:00 Europe/Budapest``
    ("" for None or no zone): its next slot reads as declared, whatever the reader's zone."""
    if value is None or not zone:
        return ""
    return f"{value.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} {zone}"


@register.simple_tag
def took(start, end):
    """The duration from ``start`` to ``end``, or ``—``."""
    return between(start, end)


@register.filter
def tally(counts):
    """``{"approved": 3}`` as ``approved 3`` (``none`` when empty)."""
    return words.tally(counts or {})


@register.filter
def json_scalar(value):
    """A required or observed value of the earning report's evidence: ``yes``/``no``, ``none``, else as is."""
    return scalar_text(value)


@register.inclusion_tag("ops/_admin_links.html")
def operator_links():
    """The admin index's links to the dashboard and to the pending proposals, with their count (one query)."""
    return {"pending": Proposal.objects.filter(status=ProposalStatus.PENDING).count(), "inbox_url": words.inbox_url()}


@register.inclusion_tag("admin/runtime/run/_live.html")
def run_live(run):
    """A run's live panel as its page first shows it (``runtime.admin.live.run_now``); it then
    polls ``/live/runs/<id>/`` while the run has not ended."""
    return run_now(run, now=clock.database_now())


@register.inclusion_tag("admin/runtime/proposal/_inbox_watch.html")
def inbox_watcher():
    """The inbox list's watcher, seeing what is pending as the list is shown (one query); it
    then polls ``/live/inbox/`` (``runtime.admin.live.inbox_watch``)."""
    return {"watch": inbox_watch()}
