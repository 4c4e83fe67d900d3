"""The fragments the inbox's pages poll (docs/web.md, "Pages that refresh themselves"): a run's
live panel and the inbox list's watcher. Both are staff-only (``ops.web_urls.staff_fragment``:
403 without a staff session, never the login page) and each begins with a ``<title>`` that
htmx puts in the tab, so the pending count there follows too.
"""

from django.contrib import admin
from django.http import Http404
from django.template.response import TemplateResponse

from runtime import clock
from runtime.admin.live import inbox_watch, page_title, run_now
from runtime.models import Proposal, Run


def run_fragment(request, run_id: int):
    """``GET /live/runs/<id>/``: the run's live panel (``runtime.admin.live.run_now``) and its Times
    and Attempts fieldsets out of band. A panel for an ended run carries no trigger: the page stops
    polling. 404 for an unknown run."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404(f"no run {run_id}")
    return TemplateResponse(request, "admin/runtime/run/_live_fragment.html", {
        **run_now(run, now=clock.database_now(), ended_while_open=True),
        "title": page_title(Run, listing=False),
        "subtitle": str(run),
        "site_title": admin.site.site_title,
    })


def _seen(value: str | None) -> int | None:
    return int(value) if value and value.isascii() and value.isdigit() and len(value) <= 18 else None


def inbox_fragment(request):
    """``GET /live/inbox/?seen_pending=N&seen_newest=ID``: the inbox list's watcher for a list
    shown with N pending proposals, the newest ID (``runtime.admin.live.inbox_watch``): the
    current count and newest id, whether the list is stale and how many arrived since. A
    missing or malformed figure reads as none (the list is then stale)."""
    watch = inbox_watch(seen_pending=_seen(request.GET.get("seen_pending")) or 0,
                        seen_newest=_seen(request.GET.get("seen_newest")))
    return TemplateResponse(request, "admin/runtime/proposal/_inbox_fragment.html", {
        "watch": watch,
        "pending_proposals": watch["pending"],
        "title": page_title(Proposal, listing=True),
        "site_title": admin.site.site_title,
    })
