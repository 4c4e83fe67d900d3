"""Reading the loops' enable/disable history (``LoopChange``): when, within a window, was a
loop not watched? (docs/schedules.md, "Earning auto: `schedule report LOOP`").

A loop is watched from an ``enabled`` or ``resumed`` change until the next change of any other
kind — ``disabled`` or ``paused`` (``schedules.pausing``): a pause is a gap.
Before a loop's first change the slot loop had not seen it: not watched either.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max, Q

from .models import LoopChange, LoopChangeKind


@dataclass(frozen=True)
class Gap:
    """A stretch ``[start, end)`` of a window in which the loop was not watched, and why
    (``never seen`` before its first change, else the change's kind, e.g. ``disabled``)."""

    start: datetime
    end: datetime
    why: str

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def unwatched(names: list[str], *, since: datetime, now: datetime) -> dict[str, list[Gap]]:
    """The gaps in ``[since, now]`` of each loop in ``names`` (an empty list: watched
    throughout), in time order. One query whatever the history's length before ``since``:
    each loop's last change at or before ``since``, and its changes after it."""
    before = (
        LoopChange.objects.filter(loop__in=names, at__lte=since).order_by()
        .values("loop").annotate(last=Max("id")).values("last")
    )
    rows = (
        LoopChange.objects.filter(Q(id__in=before) | Q(loop__in=names, at__gt=since, at__lte=now))
        .order_by("loop", "at", "id").values_list("loop", "at", "kind")
    )
    changes: dict[str, list[tuple[datetime, str]]] = {name: [] for name in names}
    for loop, at, kind in rows:
        changes[loop].append((at, kind))
    return {name: gaps_of(changes[name], since=since, now=now) for name in names}


def gaps_of(changes: list[tuple[datetime, str]], *, since: datetime, now: datetime) -> list[Gap]:
    """The gaps in ``[since, now]`` given a loop's changes ``(at, kind)`` in time order (the
    last one at or before ``since``, if any, first). Pure."""
    gaps: list[Gap] = []
    watched, why, mark = False, "never seen", since
    for at, kind in changes:
        start = max(at, since)
        if kind in (LoopChangeKind.ENABLED, LoopChangeKind.RESUMED):
            if not watched and start > mark:
                gaps.append(Gap(mark, start, why))
            watched = True
        elif watched:
            watched, why, mark = False, kind, start
        else:
            why = kind
    if not watched and now > mark:
        gaps.append(Gap(mark, now, why))
    return gaps
