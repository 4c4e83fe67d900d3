"""The loops dashboard: every loop, problems first, paged, with the doctor's anomalies as a
banner; it refreshes itself through the table fragment (docs/web.md, "The dashboard").

A page costs the same number of queries whatever the number of loops: the doctor's
document (``ops.doctor.collect_status``, a constant number), the late loops
(``ops.web.badges.late_loops``), then only the page's loops through ``schedules_overview``
and the pending count, and which of the page's loops earned ``auto`` (``ops.earning.earned_loops``:
a constant number of grouped queries for the page, none when no loop on it could earn it). The ordering is arithmetic on the loops in question only: the
problems are sorted, the rest is the registry's names in order (``schedules.names.loop_index``),
walked up to the page.
"""

import math
import time
from collections.abc import Iterable
from itertools import chain, islice

from django.contrib import admin
from django.core.paginator import Paginator
from django.template.response import TemplateResponse

from runtime import clock
from runtime.models import Proposal, ProposalStatus
from runtime.registry import Registry, RegistryInvalid, get_registry
from schedules.names import loop_index
from schedules.overview import schedules_overview
from schedules.pausing import CONTROL_PERMISSION, paused_loops

from ..doctor import collect_status
from ..earning import earned_loops
from . import words
from .badges import doctor_flags, expired_lease_loops, late_loops, loop_badges, rank
from .loop_control import UNTIL_CHOICES

#: Loops per page of the dashboard.
PAGE_SIZE = 50
#: How often the dashboard's table refreshes itself, in seconds, at the least: a table that took
#: longer than half of it to compute (a hundred thousand loops) waits twice its own time, so an
#: open dashboard keeps at most half of one HTTP thread busy.
REFRESH_SECONDS = 5
#: The dashboard's title, in its tab after the pending count: ``(3) Loops | Factory runtime``.
DASHBOARD_TITLE = "Loops"


def refresh_after(elapsed: float) -> int:
    """Seconds until the table refreshes, after one that took ``elapsed`` seconds to compute. Pure."""
    return max(REFRESH_SECONDS, math.ceil(2 * elapsed))


class RankedNames:
    """The loop names in the dashboard's order, as a sequence ``Paginator`` slices: the
    ``problems`` (already ranked), then the ``enabled`` names not among them, then the
    ``disabled`` ones (both by name). A slice walks the names up to its end, never sorts them."""

    def __init__(self, problems: list[str], enabled: tuple[str, ...], disabled: tuple[str, ...]):
        self.problems = problems
        self.skip = set(problems)
        self.enabled = enabled
        self.disabled = disabled

    def __len__(self) -> int:
        return len(self.problems) + len(self.enabled) - len(self.skip) + len(self.disabled)

    def __getitem__(self, window: slice) -> list[str]:
        start, stop, _ = window.indices(len(self))
        ok: Iterable[str] = (name for name in self.enabled if name not in self.skip)
        return list(islice(chain(self.problems, ok, self.disabled), start, stop))


def ranked_names(registry: Registry, flags: dict[str, list[str]], late: set[str], paused: set[str] = frozenset()) -> RankedNames:
    """The loops of ``registry``, problems first (``rank``, then name), then ok, then disabled
    (docs/web.md, "Status badges"). Only the loops the doctor flags, that are late or that
    are paused are ranked one by one."""
    loops, index = registry.loops, loop_index(registry)
    problems = [name for name in {*flags, *late, *paused} if name in loops and loops[name].enabled]
    problems.sort(key=lambda name: (rank(loop_badges(loops[name], flags, late, paused)), name))
    return RankedNames(problems, index.enabled, index.disabled)


def dashboard_context(request) -> dict:
    """What the dashboard and its fragment render: ``status`` (the doctor's document), ``banner``,
    ``rows`` (the page's loops, problems first), ``page`` (a Django page of loop names),
    ``pending`` (every pending proposal, also the title's ``pending_proposals``), ``inbox_url`` and
    ``refresh_seconds`` (``REFRESH_SECONDS``). A row's ``earned`` says the loop earned ``auto`` over the
    last ``FACTORY_EARN_WINDOW_DAYS`` days."""
    started = time.monotonic()
    now = clock.database_now()
    status = collect_status(now=now)
    try:
        registry = get_registry()
    except RegistryInvalid:
        registry = None
    flags = doctor_flags(status, expired_lease_loops(status))
    late = late_loops(registry, now=now) if registry else set()
    paused = set(paused_loops())
    ordered = ranked_names(registry, flags, late, paused) if registry else RankedNames([], (), ())
    page = Paginator(ordered, PAGE_SIZE).get_page(request.GET.get("page"))
    views = {view.loop.name: view for view in schedules_overview(registry, now=now, names=list(page))} if page else {}
    earned = earned_loops(registry, list(page), now=now) if page else set()
    rows = [_row(views[name], loop_badges(registry.loops[name], flags, late, paused), name in earned) for name in page]
    pending = Proposal.objects.filter(status=ProposalStatus.PENDING).count()
    return {
        "now": now,
        "status": status,
        "banner": words.banner(status),
        "rows": rows,
        "page": page,
        "loop_count": len(ordered),
        "pending": pending,
        "pending_proposals": pending,
        "inbox_url": words.inbox_url(),
        "can_control": request.user.has_perm(CONTROL_PERMISSION),
        "until_choices": UNTIL_CHOICES,
        "refresh_seconds": refresh_after(time.monotonic() - started),
    }


def _row(view, badges: list[str], earned: bool) -> dict:
    loop = view.loop
    return {
        "name": loop.name,
        "cadence": words.cadence(loop),
        "approval": loop.approval,
        "earned": earned,
        "enabled": loop.enabled,
        "source": loop.source,
        "overrides": ", ".join(loop.overrides),
        "last_slot": view.last_slot_fired,
        "last_tick_at": view.last_tick_at,
        "next_slot": view.next_slot_due,
        "zone": loop.timezone if loop.at else None,
        "outcome": words.outcome(view.last_outcome.as_json() if view.last_outcome else None,
                                 view.last_run.as_json() if view.last_run else None),
        "pending": view.pending_proposals,
        "pending_url": words.inbox_url(loop.name),
        "badges": badges,
        "problem": rank(badges) < 2,
        "paused": view.paused,
    }


def dashboard(request):
    """``GET /dashboard/``: the whole page (staff only, through the admin's login)."""
    context = {**admin.site.each_context(request), "is_nav_sidebar_enabled": False, "title": DASHBOARD_TITLE, **dashboard_context(request)}
    return TemplateResponse(request, "ops/dashboard.html", context)


def dashboard_table(request):
    """``GET /dashboard/table/``: the banner and the table alone, which the page polls, after a
    ``<title>`` that htmx puts in the tab (the pending count in it follows)."""
    context = {"title": DASHBOARD_TITLE, "site_title": admin.site.site_title, **dashboard_context(request)}
    return TemplateResponse(request, "ops/_dashboard_fragment.html", context)
