"""Every answer of /events, /github, /schedules and /status in its documented shape (issue 11,
list 5; docs/design.md §10, docs/intake.md "Every answer"): methods not documented are 405
with ``Allow``, a fault is a JSON 500 with a request id the log carries, a bad Host is a JSON
400, and no ``$`` of a pattern lets a trailing newline through."""

import json
import logging
import os

import pytest
import time_machine
from django.db import OperationalError
from django.test import Client

from factory_site.logs import TextFormatter
from tests.events_door import NOW, body_of, envelope
from tests.events_door import SECRET as EVENTS_SECRET
from tests.events_door import post as post_events
from tests.github import GITHUB, REPOS_YAML
from tests.github import SECRET as GITHUB_SECRET
from tests.github import post as post_github

pytestmark = pytest.mark.django_db

TOKEN = "a-long-random-api-token"
ROUTES = {"/events": "POST", "/github": "POST", "/schedules": "GET", "/status": "GET", "/metrics": "GET"}
SHA = "6f0b5a9c2c4caea39f73a4f5f4dbee093265ab2a"


@pytest.fixture(autouse=True)
def secrets(settings, host_clock_as_database_clock):
    settings.FACTORY_API_TOKEN = TOKEN
    settings.FACTORY_EVENTS_SECRET = EVENTS_SECRET
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = GITHUB_SECRET
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("method", ["OPTIONS", "HEAD", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("credentials", [{"Authorization": f"Bearer {TOKEN}"}, {}], ids=["token", "anonymous"])
def test_a_method_not_documented_is_405_with_allow(route, method, credentials):
    response = Client().generic(method, route, headers=credentials)
    assert response.status_code == 405
    assert response["Allow"] == ROUTES[route]
    assert response["Content-Type"] == "application/json"
    if method != "HEAD":
        assert response.json() == {"error": "method_not_allowed", "detail": f'Method "{method}" not allowed.'}


@pytest.mark.parametrize("route", ["/events", "/github"])
def test_a_get_of_a_door_is_405_with_allow_post(route):
    response = Client().get(route)
    assert (response.status_code, response["Allow"], response.json()) == (
        405, "POST", {"error": "method_not_allowed", "detail": 'Method "GET" not allowed.'},
    )


def _fail(*args, **kwargs):
    raise OperationalError("connection to server lost: the secret detail")


class Lines(logging.Handler):
    """The log lines as the runtime's formatter writes them, at the moment they are written."""

    def __init__(self):
        super().__init__()
        self.setFormatter(TextFormatter())
        self.lines = []

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.mark.parametrize("route, target", [
    ("/status", "ops.views.collect_status"),
    ("/schedules", "ops.views.schedules_overview"),
])
def test_a_database_fault_on_a_read_is_a_json_500_whose_request_id_the_log_carries(route, target, monkeypatch):
    monkeypatch.setattr(target, _fail)
    lines = Lines()
    logging.getLogger("django.request").addHandler(lines)
    try:
        response = Client(raise_request_exception=False).get(
            route, headers={"Authorization": f"Bearer {TOKEN}", "X-Request-Id": "probe-1"},
        )
    finally:
        logging.getLogger("django.request").removeHandler(lines)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response["X-Request-Id"] == "probe-1"
    assert response.json() == {
        "error": "internal_error",
        "detail": "the server failed to answer this request; its log has the cause under this requestId",
        "requestId": "probe-1",
    }
    (line,) = lines.lines
    first, _, traceback = line.partition("\n")
    assert first.split(" ", 1)[1] == (
        f"ERROR django.request[{os.getpid()}] Internal Server Error: {route} "
        f"status_code=500 request=\"<WSGIRequest: GET '{route}'>\""
    )
    assert traceback.startswith("Traceback")
    assert "OperationalError: connection to server lost: the secret detail" in line
    assert line.endswith(" requestId=probe-1")
    assert "secret detail" not in response.content.decode()


def test_a_database_fault_on_a_door_is_a_json_500_with_a_fresh_request_id(monkeypatch):
    monkeypatch.setattr("intake.door_admission.admit_batch", _fail)
    response = post_events(body_of(envelope()), client=Client(raise_request_exception=False),
                           **{"X-Request-Id": "not well formed!"})
    body = response.json()
    assert (response.status_code, body["error"]) == (500, "internal_error")
    assert len(body["requestId"]) == 32 and body["requestId"] != "not well formed!"
    assert response["X-Request-Id"] == body["requestId"]


def test_every_answer_carries_a_request_id():
    response = Client().get("/status", headers={"Authorization": f"Bearer {TOKEN}", "X-Request-Id": "abc.DEF-1:2_3"})
    assert (response.status_code, response["X-Request-Id"]) == (200, "abc.DEF-1:2_3")


@pytest.mark.parametrize("route", ROUTES)
def test_a_host_this_server_does_not_serve_is_a_json_400(route):
    response = Client(HTTP_HOST="evil.example").generic(ROUTES[route], route)
    assert response.status_code == 400
    assert response.json() == {
        "error": "bad_request",
        "detail": "the request was refused before reaching the route (DisallowedHost)",
    }


def test_a_bad_host_is_not_mailed_to_the_admins(settings):
    from django.core import mail

    settings.ADMINS = [("Operations", "ops@example.org")]
    assert Client(HTTP_HOST="evil.example").post("/events").status_code == 400
    assert mail.outbox == []
    assert settings.LOGGING["loggers"]["django.security"] == {"handlers": ["console"], "propagate": False}


@pytest.mark.parametrize("route", ["/api/proposals", "/api/schema/"])
def test_the_approval_api_answers_a_bad_host_in_json_too(route):
    response = Client(HTTP_HOST="evil.example").get(route)
    assert (response.status_code, response.json()) == (400, {
        "error": "bad_request",
        "detail": "the request was refused before reaching the route (DisallowedHost)",
    })


def test_the_admin_keeps_djangos_page_for_a_bad_host():
    response = Client(HTTP_HOST="evil.example").get("/admin/")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


# --- `$` never matches before a final newline ----------------------------------------------


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_route_with_a_slash_at_the_end_is_a_json_404_naming_the_route(route):
    response = Client().post(route + "/", data=b"{}", content_type="application/json")
    assert response.status_code == 404
    assert response.json() == {
        "error": "not_found", "detail": f"there is no {route}/; the route is {route}, without the slash at the end"}


def test_any_other_unknown_path_gets_the_operators_404_page():
    response = Client().get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_an_event_id_with_a_trailing_newline_is_refused():
    response = post_events(body_of(envelope(eventId="x\n")))
    assert response.status_code == 422
    assert response.json() == {"errors": [
        {"code": "invalid_envelope", "detail": "envelope at eventId: 'x\\n' does not match '^[\\\\x21-\\\\x7e]+$'"},
    ]}


def test_a_repo_with_a_trailing_newline_is_refused():
    response = post_events(body_of(envelope(type="factory.work.requested", payload={"repo": "hello\n"})))
    assert response.status_code == 422
    assert response.json() == {"errors": [
        {"code": "invalid_payload", "detail": "payload at repo: 'hello\\n' does not match '^[a-z0-9][a-z0-9-]{0,40}$'"},
    ]}


def test_a_head_sha_with_a_newline_never_makes_a_merge_pr_event_id(registry_files):
    registry_files.write_config("repos.yaml", REPOS_YAML)
    payload = json.loads((GITHUB / "workflow_run.completed.pull_request-success.json").read_bytes())
    payload["workflow_run"]["head_sha"] = SHA + "\n"
    response = post_github(json.dumps(payload).encode(), "workflow_run")
    assert response.status_code == 422
    assert response.json() == {"errors": [{
        "code": "malformed_payload",
        "detail": "workflow_run delivery: workflow_run.head_sha is not 40 lower-case hex digits",
    }]}


def test_the_longest_cadence_is_served_by_the_schedules_read(registry_files):
    registry_files.update("schedules.json", lambda loops: loops["reaper"].update(every="366d", enabled=True))
    response = Client().get("/schedules", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    (reaper,) = [loop for loop in response.json() if loop["name"] == "reaper"]
    # 366 days from the epoch's slot grid: the slot that contains NOW began on 12 February.
    assert (reaper["every"], reaper["cadenceSeconds"], reaper["enabled"], reaper["nextSlotDue"]) == (
        "366d", 31622400, True, "2026-02-12T00:00:00Z",
    )


def test_the_longest_cadence_is_served_by_the_status_read(registry_files):
    registry_files.update("schedules.json", lambda loops: loops["reaper"].update(every="366d", enabled=True))
    response = Client().get("/status", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    body = response.json()
    # Nothing about the reaper's year-long cadence is an anomaly: only the slot loop, which no
    # test runs, is stale.
    assert (
        body["ok"], body["anomalies"], body["stoppedSchedules"], body["stuckLoops"], body["futureLastSlot"],
        body["registryInvalid"],
    ) == (False, ["slotLoopStale"], [], [], [], [])
