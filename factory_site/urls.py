"""Routes: the operator inbox (admin), the intake doors, the schedule and status views."""

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Factory event runtime"
admin.site.site_title = "Factory runtime"
admin.site.index_title = "Inbox"

#: The API routes answer JSON here too; other routes keep Django's pages (factory_site.requests).
handler400 = "factory_site.requests.bad_request"
handler500 = "factory_site.requests.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("ops.api.urls")),
    path("", include("intake.urls")),
    path("", include("ops.urls")),
]
