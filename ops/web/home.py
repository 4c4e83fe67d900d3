"""``/``: a signed-in operator goes to the dashboard, anyone else to the admin's login,
which comes back to the dashboard (docs/web.md)."""

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseRedirect
from django.urls import reverse


def home(request):
    """``GET /``: 302 to ``/dashboard/`` for an active staff user, else to ``/admin/login/?next=/dashboard/``
    (the admin's own redirect for its pages)."""
    dashboard = reverse("web:dashboard")
    if admin.site.has_permission(request):
        return HttpResponseRedirect(dashboard)
    return redirect_to_login(dashboard, reverse("admin:login"))
