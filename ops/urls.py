"""Routes of the ops app: the schedule view, the doctor's status and the metrics (docs/design.md §10)."""

from django.urls import path

from .views import MetricsView, SchedulesView, StatusView

urlpatterns = [
    path("schedules", SchedulesView.as_view(), name="schedules"),
    path("status", StatusView.as_view(), name="status"),
    path("metrics", MetricsView.as_view(), name="metrics"),
]
