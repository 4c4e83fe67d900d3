"""A loop's page: what it is, its status, its recent ticks as a timeline and the earning
report over a chosen window (docs/web.md, "A loop's page"; ``ops.earning``).

``?since=7d`` (a span in the cadence grammar, or a past RFC 3339 instant) sets the report's
window, default ``ops.earning.default_window()``; a bad one is said on the page. ``?before=ID``
pages the timeline. An unknown loop is a 404 page. The page refreshes its status, report and
timeline through ``/loops/<name>/live/`` (``loop_live``) with the same parameters, as the
dashboard refreshes its table. A person with ``control_loop`` also sees the loop's controls
(pause or resume, run once now: ``ops.web.loop_control``), outside the part that refreshes.
"""

import time
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin
from django.http import HttpResponse, HttpResponseNotFound
from django.template.response import TemplateResponse
from django.urls import reverse

from lib.notes import NOTE_MAX_LENGTH
from runtime import clock
from runtime.registry import RegistryInvalid, get_registry
from runtime.services.approval import APPROVE_PERMISSION
from schedules.models import ScheduleState
from schedules.overview import due_keys, schedules_overview
from schedules.pausing import CONTROL_PERMISSION, OTHER_DOORS, resume_words
from schedules.repair import future_last_slots
from schedules.triggering import new_request_id

from ..doctor_checks import find_expired_leases, find_interrupted_runs, find_starved_queue, find_stuck_loops
from ..earning import WindowError, default_window, earning_report, window_start
from ..earning_evidence import VERDICT_WORDS
from . import words
from .badges import doctor_flags, expired_lease_loops, is_late, loop_badges
from .dashboard import refresh_after
from .loop_control import PAUSE_EFFECT, UNTIL_CHOICES
from .timeline import parse_before, timeline

#: The longest ``?since=`` echoed back: a window is a few characters; longer text is refused.
SINCE_MAX_LENGTH = 64
#: The windows the page offers as links.
WINDOWS = ("1d", "7d", "30d", "90d")


def loop_findings(view, *, now, registry) -> dict:
    """The doctor's findings that concern this loop, as ``/status`` lists (``doctor_flags`` reads them):
    its own stopped and pile-up judgement from its view, the run and loop checks of
    ``ops.doctor_checks`` (a constant number of queries, as the doctor's)."""
    loop = view.loop
    stopped = [{"loop": loop.name}] if view.stopped else []
    piling = loop.approval == "watched" and view.pending_proposals > settings.FACTORY_PILEUP_THRESHOLD
    return {
        "stoppedSchedules": stopped,
        "proposalPileUps": [{"loop": loop.name}] if piling else [],
        "stuckLoops": find_stuck_loops(),
        "starvedQueue": find_starved_queue(registry, now=now),
        "interruptedRuns": find_interrupted_runs(),
        "expiredLeases": find_expired_leases(now=now),
        "futureLastSlot": future_last_slots(now=now),
    }


def report_context(registry, name: str, since: str, *, now) -> dict:
    """``{since, report, verdict_words, window_error}``: the earning report over ``since`` and its
    verdict in words, or why the window is refused."""
    if len(since) > SINCE_MAX_LENGTH:
        return {"since": since[:SINCE_MAX_LENGTH], "report": None,
                "window_error": f"a window is at most {SINCE_MAX_LENGTH} characters (7d, 90m, or an RFC 3339 instant)"}
    try:
        start = window_start(since, now=now)
    except WindowError as exc:
        return {"since": since, "report": None, "window_error": f"the window's start {exc}"}
    report = earning_report(registry, name, since=start, now=now, registry_dir=settings.FACTORY_REGISTRY_DIR)
    return {"since": since, "report": report, "verdict_words": VERDICT_WORDS[report["verdict"]], "window_error": ""}


def loop_context(request, registry, loop) -> dict:
    """What the page and its live part render: the loop, its status, the report over ``?since=``,
    the timeline before ``?before=``, ``live_url`` (the part with the same parameters) and
    ``refresh_seconds`` (as the dashboard's, ``refresh_after``)."""
    started = time.monotonic()
    name = loop.name
    now = clock.database_now()
    view = schedules_overview(registry, now=now, names=[name])[0]
    findings = loop_findings(view, now=now, registry=registry)
    state = ScheduleState.objects.filter(loop=name).first()
    keys_due = view.keyed.next_due if view.keyed else None
    late = {name} if is_late(loop, state, now, keys_due) else set()
    badges = loop_badges(loop, doctor_flags(findings, expired_lease_loops(findings)), late, {name} if view.paused else ())
    ticks, older = timeline(name, before=parse_before(request.GET.get("before")))
    since = request.GET.get("since") or default_window()
    kept = {key: request.GET[key] for key in ("since", "before") if request.GET.get(key)}
    context = {
        "now": now,
        "loop": loop,
        "view": view,
        "badges": badges,
        "cadence": words.cadence(loop),
        "outcome": words.outcome(view.last_outcome.as_json() if view.last_outcome else None,
                                 view.last_run.as_json() if view.last_run else None),
        "pending_url": words.inbox_url(name),
        "due_keys": due_keys(name) if loop.keyed is not None else [],
        "ticks": ticks,
        "older": older,
        "first_page": request.GET.get("before") is None,
        "windows": WINDOWS,
        "live_url": reverse("web:loop-live", args=[name]) + (f"?{urlencode(kept)}" if kept else ""),
        **report_context(registry, name, since, now=now),
    }
    return {**context, "refresh_seconds": refresh_after(time.monotonic() - started)}


def loop_page(request, name: str):
    """``GET /loops/<name>/`` (staff only, through the admin's login)."""
    base = {**admin.site.each_context(request), "is_nav_sidebar_enabled": False}
    try:
        registry = get_registry()
    except RegistryInvalid as exc:
        return TemplateResponse(request, "ops/loop_missing.html", {
            **base, "title": "No registry", "name": name, "detail": f"no registry is in force: {exc}",
        }, status=503)
    loop = registry.loops.get(name)
    if loop is None:
        return TemplateResponse(request, "ops/loop_missing.html", {
            **base, "title": f"No loop {name}", "name": name,
            "detail": "no loop of that name is declared in the registry, the overlay or config/repos.yaml",
        }, status=404)
    return TemplateResponse(request, "ops/loop.html", {
        **base, "title": f"Loop {name}", **loop_context(request, registry, loop), **control_context(request, loop),
    })


def control_context(request, loop) -> dict:
    """What the page's controls render (``ops/_loop_control.html``) for ``loop``: whether the
    person may control loops (``can_control``) and approve, a fresh ``request_id`` for the
    trigger's form, and the words of ``ops.web.loop_control`` and of what resuming does."""
    return {
        "resume_words": resume_words(loop),
        "can_control": request.user.has_perm(CONTROL_PERMISSION),
        "can_approve": request.user.has_perm(APPROVE_PERMISSION),
        "request_id": new_request_id(),
        "until_choices": UNTIL_CHOICES,
        "pause_effect": PAUSE_EFFECT,
        "other_doors": OTHER_DOORS,
        "note_max_length": NOTE_MAX_LENGTH,
    }


def loop_live(request, name: str):
    """``GET /loops/<name>/live/``: the status, report and timeline alone, which the page polls
    (``?since=`` and ``?before=`` as the page's). A loop no longer declared, or no registry in
    force, is a plain 404 or 503 that htmx does not swap: the page keeps what it shows."""
    try:
        registry = get_registry()
    except RegistryInvalid:
        return HttpResponse("no registry is in force", content_type="text/plain", status=503)
    loop = registry.loops.get(name)
    if loop is None:
        return HttpResponseNotFound(f"no loop {name}", content_type="text/plain")
    return TemplateResponse(request, "ops/_loop_live.html", loop_context(request, registry, loop))
