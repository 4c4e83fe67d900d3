"""Routes: the operator's pages and the records (admin), the intake doors, the schedule and status views."""

from django.contrib import admin
from django.urls import include, path

from ops.web.admin_site import put_runtime_first

admin.site.site_header = "Factory event runtime"
admin.site.site_title = "Factory runtime"
admin.site.index_title = "All records"
# The operator's navigation (templates/admin/_operator_nav.html) replaces the sidebar: the pages use the width.
admin.site.enable_nav_sidebar = False
admin.site.site_url = None
put_runtime_first(admin.site)

#: The API routes answer JSON here too; other routes get the operator's pages (templates/403.html,
#: 404.html, 500.html) or Django's 400 page (factory_site.requests).
handler400 = "factory_site.requests.bad_request"
handler403 = "factory_site.requests.permission_denied"
handler404 = "factory_site.requests.page_not_found"
handler500 = "factory_site.requests.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("ops.api.urls")),
    path("", include("intake.urls")),
    path("", include("ops.urls")),
    path("", include("ops.web_urls")),
]
