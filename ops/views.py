"""``GET /schedules``, ``GET /status`` and ``GET /metrics`` (docs/design.md §10, §11; docs/production.md).

The first two answer from the same computations as ``manage.py schedule list --json`` and
``manage.py doctor``; ``/metrics`` is the Prometheus text format (``ops.metrics``). ``now``
is read once per request.
"""

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from runtime import clock
from runtime.registry import get_registry
from schedules.overview import schedules_overview, schedules_page

from .api.openapi import metrics_read, schedules_read, status_read
from .auth import AUTHENTICATION_CLASSES, TokenOrStaff
from .doctor import collect_status
from .metrics import database_collector
from .metrics_intake import intake_registry
from .paging import only_parameters, page_request


class ReadView(APIView):
    """A token- or staff-protected read; errors answer ``{error, detail}`` (docs/design.md §10).

    Only GET is documented: OPTIONS, HEAD and the rest are 405 ``method_not_allowed`` with
    ``Allow: GET``. Every DRF refusal's ``error`` is its code: ``not_authenticated``,
    ``authentication_failed``, ``permission_denied``, ``method_not_allowed``.
    """

    authentication_classes = AUTHENTICATION_CLASSES
    permission_classes = [TokenOrStaff]
    http_method_names = ["get"]

    def initial(self, request, *args, **kwargs):
        # The method first: an undocumented method is 405 for everyone, as on the doors,
        # not 401 to an anonymous client and 405 to one with credentials.
        if request.method.lower() not in self.http_method_names:
            raise exceptions.MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        if isinstance(exc, exceptions.APIException):
            response.data = {"error": exc.default_code, "detail": str(exc.detail)}
        return response


class SchedulesView(ReadView):
    """Every effective loop, as ``schedule list --json``; with ``?page=`` or ``?pageSize=``, one
    page of them by name, ``{count, next, previous, results}`` as the approval API pages
    (docs/schedules.md, "Paging")."""

    @schedules_read
    def get(self, request):
        only_parameters(request.query_params, ("page", "pageSize"), request.path)
        paging = page_request(request.query_params)
        registry, now = get_registry(), clock.database_now()
        if paging is None:
            return Response([view.as_json() for view in schedules_overview(registry, now=now)])
        number, size = paging
        views, count = schedules_page(registry, now=now, offset=(number - 1) * size, limit=size)
        last = max(1, -(-count // size))
        if number > last:
            raise exceptions.NotFound(f"there is no page {number}: {count} loop(s) make {last} page(s) of {size}")
        url = request.build_absolute_uri()
        previous = None
        if number > 1:
            # As the approval API: the first page's link has no ?page=.
            previous = replace_query_param(url, "page", number - 1) if number > 2 else remove_query_param(url, "page")
        return Response({
            "count": count,
            "next": replace_query_param(url, "page", number + 1) if number < last else None,
            "previous": previous,
            "results": [view.as_json() for view in views],
        })


class StatusView(ReadView):
    """The doctor's document, after the product's ``version``; 200 whatever it says (``ok``
    tells), so a monitor reads it."""

    @status_read
    def get(self, request):
        return Response({"version": settings.PRODUCT_VERSION, **collect_status(now=clock.database_now())})


class MetricsView(ReadView):
    """The database's figures and this runserve's intake counters, in the Prometheus text format."""

    @metrics_read
    def get(self, request):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(database_collector(now=clock.database_now()))
        body = generate_latest(registry) + generate_latest(intake_registry())
        return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
