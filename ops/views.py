"""``GET /schedules`` and ``GET /status`` (docs/design.md §10, §11).

Both answer from the same computations as ``manage.py schedule list --json`` and
``manage.py doctor``; ``now`` is read once per request.
"""

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime import clock
from runtime.registry import store
from schedules.overview import schedules_overview

from .auth import AUTHENTICATION_CLASSES, TokenOrStaff
from .doctor import collect_status

ERROR_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
}


class ReadView(APIView):
    """A token- or staff-protected read; errors answer ``{error, detail}`` (docs/design.md §10)."""

    authentication_classes = AUTHENTICATION_CLASSES
    permission_classes = [TokenOrStaff]

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        for kind, code in ERROR_CODES.items():
            if isinstance(exc, kind):
                response.data = {"error": code, "detail": str(exc.detail)}
                break
        return response


class SchedulesView(ReadView):
    """Every effective loop, as ``schedule list --json``."""

    def get(self, request):
        store.refresh()
        views = schedules_overview(store.current(), now=clock.database_now())
        return Response([view.as_json() for view in views])


class StatusView(ReadView):
    """The doctor's document; 200 whatever it says (``ok`` tells), so a monitor reads it."""

    def get(self, request):
        return Response(collect_status(now=clock.database_now()))
