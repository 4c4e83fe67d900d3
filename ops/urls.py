"""Routes of the schedules app: the schedule view and the doctor's status (docs/design.md §10)."""

from django.urls import path

from .views import SchedulesView, StatusView

urlpatterns = [
    path("schedules", SchedulesView.as_view(), name="schedules"),
    path("status", StatusView.as_view(), name="status"),
]
