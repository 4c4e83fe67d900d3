"""``schedule list``'s text in the dashboard's order and words (docs/schedules.md; docs/web.md, "Status badges").

The text table ranks the loops as the dashboard does — the doctor's findings first, then
``late``, ``ok``, ``disabled`` — and says each loop's status with the dashboard's badges
(``ops.web.badges``), so a terminal and a browser agree on what is wrong and where. Its
``--json`` and ``GET /schedules`` keep the loops by name: scripts page through them by name.
"""

from datetime import datetime

from runtime.registry import Registry
from schedules.overview import schedules_overview

from .doctor import collect_status
from .web.badges import DISABLED, LATE, OK, doctor_flags, expired_lease_loops, late_loops, loop_badges
from .web.dashboard import ranked_names

PAUSED = "paused"
PAUSED_FOR_LONG = "paused for long"


def status_words(badges: list[str], paused: bool) -> str:
    """A loop's badges as the table's status cell: ``stopped, piling up``; a paused loop says
    ``paused`` where it would say ``ok`` or ``late`` (its slots are not expected), unless the
    doctor already calls it ``paused for long``. Pure."""
    if paused and PAUSED_FOR_LONG not in badges and DISABLED not in badges:
        badges = [PAUSED, *(badge for badge in badges if badge not in (OK, LATE))]
    return ", ".join(badges)


def ranked_page(registry: Registry, *, now: datetime, offset: int, limit: int) -> tuple[list[dict], int]:
    """``(items, count)``: the loops ``offset`` to ``offset + limit`` of ``registry`` in the
    dashboard's order at ``now``, each ``schedules_overview``'s JSON item plus ``status`` (the
    ``status_words``), and how many loops there are. The dashboard's cost: the doctor's
    document, the late loops, then the page's loops only."""
    status = collect_status(now=now)
    flags = doctor_flags(status, expired_lease_loops(status))
    late = late_loops(registry, now=now)
    ordered = ranked_names(registry, flags, late)
    names = ordered[offset:offset + limit]
    views = {view.loop.name: view for view in schedules_overview(registry, now=now, names=names)} if names else {}
    items = []
    for name in names:
        item = views[name].as_json()
        item["status"] = status_words(loop_badges(registry.loops[name], flags, late), bool(item.get("paused")))
        items.append(item)
    return items, len(ordered)
