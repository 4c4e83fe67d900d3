"""What refreshes itself in the inbox (docs/web.md, "Pages that refresh themselves"): a run's
state while it is not over, the pending proposals the inbox list watches, and the pending
count every operator page's title carries.

The views that serve these as fragments are the operator pages' (``ops.web.live``); this
module says what a fragment holds, so that the page and its fragment render the same thing.
"""

from pathlib import Path

from django.conf import settings
from django.contrib import admin
from django.db.models import Count, Max, Q
from django.utils.functional import SimpleLazyObject
from django.utils.translation import gettext

from runtime.models import TERMINAL_RUN_STATUSES, Proposal, ProposalStatus, Run, RunStatus

from .common import between, list_title, seconds_text
from .runs import attempts_html, stdout_path, times_html

#: How often a run's live panel refreshes while the run is queued, claimed or running, in seconds.
RUN_REFRESH_SECONDS = 3
#: How often it refreshes while the run is ``interrupted``: it waits for a person, who may retry
#: or close it from the runs list, a shell or the API — then the page follows its new attempt.
INTERRUPTED_REFRESH_SECONDS = 15
#: How often the inbox list asks whether the pending proposals changed, in seconds (as the dashboard).
INBOX_REFRESH_SECONDS = 5
#: How much of the end of a run's captured stdout its live panel shows, in bytes.
TAIL_BYTES = 4 * 1024


def refresh_seconds(status: str) -> int | None:
    """Seconds between two refreshes of a run's panel in ``status``; None once it has ended. Pure."""
    if status in TERMINAL_RUN_STATUSES:
        return None
    return INTERRUPTED_REFRESH_SECONDS if status == RunStatus.INTERRUPTED else RUN_REFRESH_SECONDS


def output_tail(path: Path, limit: int = TAIL_BYTES) -> dict:
    """``{text, size, shown}``: the last ``limit`` bytes of a captured output file (starting at a
    line when the cut falls inside one and the tail holds a newline), its size in bytes and how
    many bytes ``text`` holds; ``text`` is "" and ``size`` None when there is no such file yet.
    Only files under ``FACTORY_RUNS_DIR`` are read (as ``runs.read_output_page``)."""
    runs_dir = Path(settings.FACTORY_RUNS_DIR).resolve()
    try:
        resolved = path.resolve()
        if runs_dir not in resolved.parents:
            return {"text": "", "size": None, "shown": 0}
        with resolved.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - limit))
            data = handle.read(limit)
    except OSError:
        return {"text": "", "size": None, "shown": 0}
    if size > limit and b"\n" in data[:-1]:
        data = data[data.index(b"\n") + 1:]
    return {"text": data.decode("utf-8", errors="replace"), "size": size, "shown": len(data)}


def run_now(run: Run, *, now, ended_while_open: bool = False) -> dict:
    """What a run's live panel shows: ``run``, ``refresh_seconds`` (None once it ended),
    ``waited`` and ``took`` (``running for`` while it runs, measured to ``now``, the database's
    clock), ``running``, ``tail`` (``output_tail``), ``times`` and ``attempts`` (the Times and
    Attempts fieldsets' HTML) and ``ended_while_open`` (this is the fragment that found the run
    ended while its page was open)."""
    running = run.started_at is not None and run.finished_at is None and run.status in (RunStatus.CLAIMED, RunStatus.RUNNING)
    return {
        "run": run,
        "refresh_seconds": refresh_seconds(run.status),
        "waited": between(run.queued_at, run.started_at),
        "took": seconds_text((now - run.started_at).total_seconds()) if running else between(run.started_at, run.finished_at),
        "running": running,
        "tail": output_tail(stdout_path(run)),
        "times": times_html(run),
        "attempts": attempts_html(run),
        "ended_while_open": ended_while_open and run.status in TERMINAL_RUN_STATUSES,
    }


def pending_summary(seen_newest: int = 0) -> dict:
    """``{pending, newest, arrived}`` in one query on the pending proposals (``proposal_pending_idx``):
    how many are pending, the newest one's id (None when none is) and how many of them have an
    id above ``seen_newest``."""
    return Proposal.objects.filter(status=ProposalStatus.PENDING).aggregate(
        pending=Count("id"), newest=Max("id"), arrived=Count("id", filter=Q(id__gt=seen_newest)),
    )


def inbox_watch(*, seen_pending: int | None = None, seen_newest: int | None = None) -> dict:
    """What the inbox list's watcher holds, for a list shown with ``seen_pending`` pending
    proposals, the newest ``seen_newest`` (both None: the list being shown now, which sees what is
    pending now): ``pending``, ``newest``, ``arrived`` (pending ones newer than ``seen_newest``),
    ``stale`` (the pending proposals differ from the list's: it should be refreshed),
    ``seen_pending``, ``seen_newest`` and ``refresh_seconds`` (``INBOX_REFRESH_SECONDS``). One query."""
    figures = pending_summary(seen_newest or 0)
    if seen_pending is None:
        seen_pending, seen_newest, figures["arrived"] = figures["pending"], figures["newest"], 0
    return {
        **figures,
        "stale": (figures["pending"], figures["newest"]) != (seen_pending, seen_newest),
        "seen_pending": seen_pending,
        "seen_newest": seen_newest,
        "refresh_seconds": INBOX_REFRESH_SECONDS,
    }


def page_title(model, *, listing: bool) -> str:
    """The title of a read-only model's change list (``Proposals``: ``common.list_title``) or
    object page (``View run``), so that a fragment's ``<title>`` says what its page's did."""
    return list_title(model) if listing else gettext("View %s") % model._meta.verbose_name


def pending_proposals(request) -> dict:
    """Context processor: ``pending_proposals``, the count of pending proposals for a signed-in
    staff user (None for anyone else), counted only when a template uses it (one ``COUNT`` on
    the partial index ``proposal_pending_idx``). Page titles carry it (templates/admin/_title.html)."""
    def count():
        if not admin.site.has_permission(request):
            return None
        return Proposal.objects.filter(status=ProposalStatus.PENDING).count()
    return {"pending_proposals": SimpleLazyObject(count)}
