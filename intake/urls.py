"""The intake doors (docs/design.md §10): signed factory events and GitHub deliveries."""

from django.urls import path

from intake.views import EventsView, GitHubView

urlpatterns = [
    path("events", EventsView.as_view(), name="intake-events"),
    path("github", GitHubView.as_view(), name="intake-github"),
]
