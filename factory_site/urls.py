"""Routes: the operator inbox (admin), the intake doors, the schedule and status views."""

from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Factory event runtime"
admin.site.site_title = "Factory runtime"
admin.site.index_title = "Inbox"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("intake.urls")),
    path("", include("ops.urls")),
]
