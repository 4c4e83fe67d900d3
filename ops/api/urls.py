"""Routes under ``/api/`` (docs/api.md): the approval API, its OpenAPI description and its browsable page."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from . import loop_views, views

urlpatterns = [
    path("events", views.EventList.as_view(), name="api-events"),
    path("events/<str:id>", views.EventDetail.as_view(), name="api-event"),
    path("proposals", views.ProposalList.as_view(), name="api-proposals"),
    path("proposals/<str:id>", views.ProposalDetail.as_view(), name="api-proposal"),
    path("proposals/<str:id>/approve", views.ProposalApprove.as_view(), name="api-proposal-approve"),
    path("proposals/<str:id>/reject", views.ProposalReject.as_view(), name="api-proposal-reject"),
    path("proposals/<str:id>/preview", views.ProposalPreview.as_view(), name="api-proposal-preview"),
    path("runs", views.RunList.as_view(), name="api-runs"),
    path("runs/<str:id>", views.RunDetail.as_view(), name="api-run"),
    path("runs/<str:id>/retry", views.RunRetry.as_view(), name="api-run-retry"),
    path("runs/<str:id>/close", views.RunClose.as_view(), name="api-run-close"),
    path("loops/<str:name>/pause", loop_views.LoopPauseView.as_view(), name="api-loop-pause"),
    path("loops/<str:name>/resume", loop_views.LoopResumeView.as_view(), name="api-loop-resume"),
    path("loops/<str:name>/trigger", loop_views.LoopTriggerView.as_view(), name="api-loop-trigger"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    re_path(r"^.*$", views.UnknownRoute.as_view(), name="api-unknown"),
]
