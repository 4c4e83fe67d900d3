"""Routes of the operator's pages (docs/web.md): ``/``, the dashboard and its table, a loop's page.

The pages are the admin's: ``admin.site.admin_view`` sends anyone without a staff session
to the admin's login (with ``next``) and keeps them out of caches.
"""

from django.contrib import admin
from django.urls import path
from django.views.decorators.http import require_GET

from .web.dashboard import dashboard, dashboard_table
from .web.home import home
from .web.loop_page import loop_page

app_name = "web"


def staff_page(view):
    return admin.site.admin_view(require_GET(view))


urlpatterns = [
    path("", require_GET(home), name="home"),
    path("dashboard/", staff_page(dashboard), name="dashboard"),
    path("dashboard/table/", staff_page(dashboard_table), name="dashboard-table"),
    path("loops/<str:name>/", staff_page(loop_page), name="loop"),
]
