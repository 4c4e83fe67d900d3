"""A query string holding NUL is refused with a 400 before any view runs (docs/web.md).

PostgreSQL cannot hold U+0000 in text: a NUL that reaches a filter (the admin's list filters,
``?loop=%00``, ``?status__exact=%00``, its search) made the database raise ``DataError`` and the
page answer 500, where SQLite answered 200. No name or value of ours can hold a NUL, so
``QueryNulMiddleware`` refuses every request whose decoded query string — a parameter's name or
value — holds one, on both databases and for every page, rather than each filter checking.

The refusal is ``django.core.exceptions.BadRequest``: Django answers it with ``handler400``
(``factory_site.requests.bad_request``) — JSON ``{error: "bad_request", detail}`` on the JSON
routes, Django's 400 page elsewhere — and logs it as a client's fault (a warning). The approval
API (``/api/``) is left to refuse for itself: it answers ``invalid_filter`` for a NUL in each
filter it reads (docs/api.md), and its lists refuse a parameter they do not take
(``invalid_parameter``, ops.paging). ``/events`` and
``/github`` do not pass here (``factory_site.door_route``) and read no query string.
"""

from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse

#: The approval API's prefix: it refuses a NUL in its own filters (ops.api.views.text_filter).
API_PREFIX = "/api/"


class NulInQueryString(BadRequest):
    """The query string holds U+0000 (``%00``), which no filter or name can match."""


class QueryNulMiddleware:
    """Raises ``NulInQueryString`` (400) for a NUL in a query parameter's name or value."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _holds_nul(request):
            raise NulInQueryString("the query string holds a NUL (%00), which no filter can match")
        return self.get_response(request)


def _holds_nul(request: HttpRequest) -> bool:
    if not request.META.get("QUERY_STRING") or request.path.startswith(API_PREFIX):
        return False
    return any("\x00" in name or any("\x00" in value for value in values) for name, values in request.GET.lists())
