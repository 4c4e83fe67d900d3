"""The signed doors' short way through the middleware (docs/design.md §10; docs/performance.md,
"Signed intake").

``SignedDoorMiddleware`` stands right after ``SecurityMiddleware`` in ``MIDDLEWARE``. A
request whose path is ``/events`` or ``/github`` goes from there to its door's view through
``CommonMiddleware`` and ``XFrameOptionsMiddleware`` only — chained as Django chains them,
each behind ``convert_exception_to_response`` — so the doors keep their host check
(400 ``bad_request``), ``Content-Length`` and ``X-Frame-Options``; what a signed door does
not use is skipped: WhiteNoise (static files), sessions, CSRF (the doors are exempt),
authentication and messages. Every other request goes on down the whole stack. The request
id, the intake counters and the security headers come before this middleware, so both ways
have them, and Django's handler around it still logs each 4xx and 5xx and answers an
unhandled exception with ``handler500``'s JSON.
"""

from collections.abc import Callable

from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.urls import resolve

#: The doors' paths (docs/design.md §10), each answered by the view the URLconf routes it to.
DOOR_PATHS = ("/events", "/github")
#: What a door request still passes through, outermost first, as in ``MIDDLEWARE``.
DOOR_MIDDLEWARE = (CommonMiddleware, XFrameOptionsMiddleware)


def door_handler(view: Callable) -> Callable[[HttpRequest], HttpResponse]:
    """``view`` behind ``DOOR_MIDDLEWARE``, built as ``BaseHandler.load_middleware`` builds a chain."""
    handler = convert_exception_to_response(view)
    for middleware in reversed(DOOR_MIDDLEWARE):
        handler = convert_exception_to_response(middleware(handler))
    return handler


class SignedDoorMiddleware:
    """Answers the door paths by ``door_handler``; passes every other request on."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.doors = {path: door_handler(resolve(path).func) for path in DOOR_PATHS}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        door = self.doors.get(request.path_info)
        return door(request) if door is not None else self.get_response(request)
