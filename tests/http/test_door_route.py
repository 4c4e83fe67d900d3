"""The signed doors' short way through the middleware (factory_site.door_route): a door request
skips sessions, CSRF, login and messages, yet answers with the headers it always had —
``Content-Length``, ``X-Frame-Options``, the security headers and the request id (the host
check's JSON 400 is in test_contract_answers.py)."""

import pytest
import time_machine
from django.http import HttpResponse
from django.test import Client

from intake.views import EventsView
from tests.events_door import NOW, SECRET, body_of, envelope, post

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def secret(settings, host_clock_as_database_clock):
    settings.FACTORY_EVENTS_SECRET = SECRET
    with time_machine.travel(NOW, tick=False):
        yield


def test_an_admission_answers_exactly_the_headers_and_body_it_did_before():
    response = post(body_of(envelope()), **{"X-Request-Id": "door-1"})
    assert response.status_code == 202
    assert response.content == b'{"admitted":true,"duplicate":false,"eventId":"bridge:factory-triage:2026-11-30"}'
    assert dict(response.headers) == {
        "Allow": "POST",
        "Content-Length": "80",
        "Content-Type": "application/json",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Referrer-Policy": "same-origin",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "X-Request-Id": "door-1",
    }


def test_a_door_request_passes_no_session_csrf_login_or_messages(monkeypatch):
    seen = []

    def record(view, request):
        seen.append(request)
        return HttpResponse(status=204)

    monkeypatch.setattr(EventsView, "post", record)
    assert Client(enforce_csrf_checks=True).post("/events", data=b"{}", content_type="application/json").status_code == 204
    [request] = seen
    assert [name for name in ("session", "user", "auth_user", "_messages", "csrf_processing_done")
            if hasattr(request, name)] == []


def test_other_routes_still_pass_the_whole_stack():
    response = Client().get("/admin/login/")
    assert response.status_code == 200
    assert response.wsgi_request.session is not None and response.wsgi_request.user.is_anonymous
    assert "csrftoken" in response.cookies

