"""Taking loops in hand from the pages: pause (with a confirmation), resume and run once now
(docs/web.md, "Pausing, resuming and running a loop"; docs/schedules.md, "Pausing a loop" and
"Running a loop once now").

- ``POST /dashboard/pause/`` with ``loop`` (one or more: the loop page's form, or the rows
  selected on the dashboard), ``note`` and ``until`` (a choice of ``UNTIL_CHOICES``): without
  ``confirm=yes`` it answers the confirmation page, which says what a pause does; with it,
  it pauses each loop and goes ``next``.
- ``POST /dashboard/resume/`` with ``loop`` (one or more) and an optional ``note``.
- ``POST /loops/<name>/trigger/`` with ``request_id`` (the form renders one: a double click
  admits one event), ``note`` and, for a keyed loop, ``key``: a person with the approve
  permission goes to the new proposal's confirmation, anyone else to the proposal.

Each needs ``schedules.control_loop`` (a forged POST without it is 403, nothing done); the
services refuse what may not be done and the page says why (``messages``). ``next`` is
followed only to this site.
"""

from datetime import timedelta

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from lib.notes import NOTE_MAX_LENGTH
from runtime import clock
from runtime.registry import RegistryInvalid, get_registry
from runtime.services.approval import APPROVE_PERMISSION
from schedules.pausing import CONTROL_PERMISSION, OTHER_DOORS, PauseRefused, pause_loop, resume_loop, resume_words
from schedules.triggering import TriggerRefused, trigger_loop

#: How long a pause from the pages lasts: seconds (empty: until resumed) and its words.
UNTIL_CHOICES = (
    ("", "until someone resumes it"),
    ("3600", "for 1 hour"),
    ("14400", "for 4 hours"),
    ("86400", "for 24 hours"),
    ("604800", "for 7 days"),
)
#: What a pause does, as the confirmation and the loop page say it (docs/schedules.md).
PAUSE_EFFECT = (
    "A paused loop fires no slot from the runtime's next iteration: no tick is admitted and its state does not "
    "advance. Missed slots are not fired afterwards: resuming fires the current slot with no skips (a keyed "
    "loop's rows that came due fire as its catch-up policy says). The registry "
    "is not changed: the loop's approval and enabled state stay as reviewed."
)
#: The most loops one pause or resume takes (a page of the dashboard is 50).
MAX_LOOPS = 100


def _check(request) -> None:
    if not request.user.has_perm(CONTROL_PERMISSION):
        raise PermissionDenied(f"{request.user.get_username()} lacks the control_loop permission")


def _next(request, default: str) -> str:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return default


def _loops(request) -> list[str]:
    return list(dict.fromkeys(name for name in request.POST.getlist("loop") if name))[:MAX_LOOPS]


def pause_loops(request):
    """``POST /dashboard/pause/``: the confirmation, or (``confirm=yes``) the pauses."""
    _check(request)
    names, note, until = _loops(request), request.POST.get("note", ""), request.POST.get("until", "")
    back = _next(request, reverse("web:dashboard"))
    if until not in dict(UNTIL_CHOICES):
        # Only a hand-made form sends another value: say so on the page it came from.
        messages.error(request, f"Nothing was paused: until={until[:40]!r} is not one of the page's choices "
                                f"({', '.join(repr(k) for k, _ in UNTIL_CHOICES)}: seconds, or empty for no end).")
        return HttpResponseRedirect(back)
    if not names:
        messages.warning(request, "No loop was selected: nothing was paused.")
        return HttpResponseRedirect(back)
    if request.POST.get("confirm") != "yes":
        return TemplateResponse(request, "ops/pause_confirm.html", {
            **admin.site.each_context(request), "title": f"Pause {len(names)} loop(s)?", "loops": names,
            "note": note, "until": until, "until_words": dict(UNTIL_CHOICES)[until], "effect": PAUSE_EFFECT,
            "other_doors": OTHER_DOORS, "next": back, "note_max_length": NOTE_MAX_LENGTH,
        })
    registry = get_registry()
    now = clock.database_now()
    ends = now + timedelta(seconds=int(until)) if until else None
    done = []
    for name in names:
        try:
            pause_loop(name, registry=registry, user=request.user, note=note, until=ends, now=now, via="web")
            done.append(name)
        except PauseRefused as exc:
            messages.error(request, f"Did not pause {name}: {exc.code}: {exc.detail}")
    if done:
        messages.success(request, f"Paused {', '.join(done)} {dict(UNTIL_CHOICES)[until]}: no slot fires meanwhile.")
    return HttpResponseRedirect(back)


def resume_loops(request):
    """``POST /dashboard/resume/``: lift each named loop's pause."""
    _check(request)
    registry, now = get_registry(), clock.database_now()
    back = _next(request, reverse("web:dashboard"))
    for name in _loops(request):
        try:
            covered = resume_loop(name, registry=registry, user=request.user, note=request.POST.get("note", ""),
                                  now=now, via="web")
            messages.success(request, f"Resumed {name}: {resume_words(registry.loops.get(name), covered)}.")
        except PauseRefused as exc:
            messages.error(request, f"Did not resume {name}: {exc.code}: {exc.detail}")
    return HttpResponseRedirect(back)


def trigger(request, name: str):
    """``POST /loops/<name>/trigger/``: run the loop once now, then its proposal's confirmation."""
    _check(request)
    page = reverse("web:loop", args=[name])
    try:
        done = trigger_loop(
            name, registry=get_registry(), user=request.user, now=clock.database_now(), via="web",
            key=request.POST.get("key") or None, note=request.POST.get("note", ""),
            request_id=request.POST.get("request_id") or None,
        )
    except (TriggerRefused, RegistryInvalid) as exc:
        messages.error(request, f"Did not run {name}: {exc}")
        return HttpResponseRedirect(page)
    if done.proposal is None:
        messages.warning(request, f"Admitted {done.event.uid}, and planning ended it: {done.outcome} {done.reason}.")
        return HttpResponseRedirect(page)
    if done.duplicate:
        messages.info(request, f"This form was sent before: {done.event.uid} is its event; nothing new was admitted.")
    else:
        messages.success(request, f"Triggered {name}: {done.event.uid} became proposal {done.proposal.pk}.")
    if request.user.has_perm(APPROVE_PERMISSION) and done.proposal.status == "pending":
        return HttpResponseRedirect(reverse("admin:runtime_proposal_decide", args=[done.proposal.pk, "approve"]))
    return HttpResponseRedirect(reverse("admin:runtime_proposal_change", args=[done.proposal.pk]))
