"""Times in the reader's zone (docs/web.md, "Times in the reader's zone").

Every instant on a page is a ``<time datetime="…Z">`` (``runtime.admin.common.instant``): its
text in the person's zone when they chose one on ``/me/`` (``ReaderZone``), else in UTC, which
``ops/static/ops/times.js`` turns into the browser's zone, with a relative form ("3 min ago")
and the exact UTC instant on hover. Without JavaScript a page reads in UTC, as before.

``ReaderZoneMiddleware`` activates the person's zone for the request (Django's current time
zone, which ``instant`` reads); the zone is read once a session (kept in the session under
``SESSION_KEY``) and again when the person changes it.
"""

from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from ..models import ReaderZone

SESSION_KEY = "reader_zone"
#: The choice that leaves the zone to the browser.
BROWSER = ""


@lru_cache(maxsize=1)
def zone_names() -> tuple[str, ...]:
    """Every IANA zone name this host knows, sorted (read once)."""
    return tuple(sorted(available_timezones()))


def person_zone(request) -> str:
    """The zone ``request``'s person chose (``""``: the browser's), from the session or, once a
    session, from ``ReaderZone`` (one query)."""
    zone = request.session.get(SESSION_KEY)
    if zone is None:
        zone = ReaderZone.objects.filter(user=request.user).values_list("zone", flat=True).first() or BROWSER
        request.session[SESSION_KEY] = zone
    return zone


class ReaderZoneMiddleware:
    """Activate the signed-in person's zone for the request (UTC for everyone else)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        zone = person_zone(request) if user is not None and user.is_authenticated and user.is_staff else BROWSER
        if zone and zone in zone_names():
            timezone.activate(ZoneInfo(zone))
            request.reader_zone = zone
        else:
            timezone.deactivate()
            request.reader_zone = BROWSER
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def reader_settings(request):
    """``GET /me/``: the person's settings (their zone); ``POST`` with ``zone`` (a zone name, or
    empty for the browser's) saves it; an unknown zone is said on the page and saves nothing."""
    if request.method == "POST":
        zone = request.POST.get("zone", "")
        if zone and zone not in zone_names():
            # Said on the page (escaped, as every message is): the form offers only known zones.
            messages.error(request, f"Nothing was saved: {zone[:64]!r} is not a time zone this host knows "
                                    "(an IANA name: Europe/Budapest).")
            return HttpResponseRedirect(reverse("web:me"))
        if zone:
            ReaderZone.objects.update_or_create(user=request.user, defaults={"zone": zone})
        else:
            ReaderZone.objects.filter(user=request.user).delete()
        request.session[SESSION_KEY] = zone
        messages.success(request, f"Times now read in {zone}." if zone else "Times now read in your browser's zone.")
        return HttpResponseRedirect(reverse("web:me"))
    return TemplateResponse(request, "ops/me.html", {
        **admin.site.each_context(request), "is_nav_sidebar_enabled": False, "title": "Your settings",
        "zone": person_zone(request), "zones": zone_names(),
    })
