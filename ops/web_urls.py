"""Routes of the operator's pages (docs/web.md): ``/``, the dashboard and its table, a loop's page and
its live part, the loops' pause, resume and trigger actions (POST), the person's settings
(``/me/``: their time zone), and the fragments a run's
page and the inbox list poll (``/live/…``).

The pages are the admin's: ``admin.site.admin_view`` sends anyone without a staff session
to the admin's login (with ``next``) and keeps them out of caches. The parts the pages poll
(the dashboard's table, a loop's live part, every ``/live/`` fragment) answer 403 instead: a
poll after the session ended must not swap the login page into the page (htmx swaps no error answer).
"""

from functools import wraps

from django.contrib import admin
from django.http import HttpResponseForbidden
from django.urls import path
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .web.dashboard import dashboard, dashboard_table
from .web.home import home
from .web.live import inbox_fragment, run_fragment
from .web.loop_control import pause_loops, resume_loops, trigger
from .web.loop_page import loop_live, loop_page
from .web.zones import reader_settings

app_name = "web"


def staff_page(view):
    return admin.site.admin_view(require_GET(view))


def staff_action(view):
    return admin.site.admin_view(require_POST(view))


def staff_fragment(view):
    @wraps(view)
    def fragment(request, *args, **kwargs):
        if not admin.site.has_permission(request):
            return HttpResponseForbidden("sign in again at /admin/login/: the session has ended", content_type="text/plain")
        return view(request, *args, **kwargs)
    return never_cache(require_GET(fragment))


urlpatterns = [
    path("", require_GET(home), name="home"),
    path("dashboard/", staff_page(dashboard), name="dashboard"),
    path("dashboard/table/", staff_fragment(dashboard_table), name="dashboard-table"),
    path("dashboard/pause/", staff_action(pause_loops), name="loops-pause"),
    path("dashboard/resume/", staff_action(resume_loops), name="loops-resume"),
    path("loops/<str:name>/", staff_page(loop_page), name="loop"),
    path("loops/<str:name>/trigger/", staff_action(trigger), name="loop-trigger"),
    path("loops/<str:name>/live/", staff_fragment(loop_live), name="loop-live"),
    path("live/runs/<int:run_id>/", staff_fragment(run_fragment), name="run-live"),
    path("live/inbox/", staff_fragment(inbox_fragment), name="inbox-live"),
    path("me/", admin.site.admin_view(require_http_methods(["GET", "POST"])(reader_settings)), name="me"),
]
