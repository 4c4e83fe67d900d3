"""POST /api/loops/{name}/pause and /resume (docs/api.md; docs/schedules.md, "Pausing a loop")."""

import sys

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.test import Client

from ops.api.tokens import create_token
from runtime.models import JournalEntry
from schedules.models import LoopPause
from tests.conftest import at
from tests.helpers import tick

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

SHARED = "a-long-random-shared-token"
HOURLY_HEARTBEAT = "schedules:\n  heartbeat:\n    every: 60m\n"
NOW = at("2026-11-30T21:05:00Z")


@pytest.fixture
def carol_token(django_user_model, registry_files, settings) -> str:
    settings.FACTORY_API_TOKEN = SHARED
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    user = django_user_model.objects.create_user("carol", password="carol-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="control_loop"))
    return create_token(user, "pager", by=user, now=NOW)[1]


@pytest.fixture
def victor_token(viewer) -> str:
    return create_token(viewer, "laptop", by=viewer, now=NOW)[1]


def post(path: str, token: str, body: dict, instant: str = "2026-11-30T21:05:00Z"):
    with time_machine.travel(at(instant), tick=False):
        response = Client().post(path, data=body, content_type="application/json",
                                 headers={"Authorization": f"Bearer {token}"})
    return response.status_code, response.json()


def test_a_person_with_control_loop_pauses_and_resumes_and_the_journal_says_so(carol_token):
    tick("2026-11-30T21:00:05Z")
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "agent failing", "until": "2026-12-01T00:00:00Z"}) == (
        200, {
            "loop": "heartbeat",
            "paused": {"by": "carol", "at": "2026-11-30T21:05:00Z", "note": "agent failing", "until": "2026-12-01T00:00:00Z"},
            "otherDoors": "events of the loop's type from other doors (the bridge, inject, GitHub) are still admitted "
                          "and planned as any other door's event: watched",
        },
    )
    assert post("/api/loops/heartbeat/resume", carol_token, {"note": "fixed"}, "2026-11-30T23:10:00Z") == (
        200, {"loop": "heartbeat", "paused": None, "coveredSlots": 2},
    )
    entries = [(e.action, e.actor, e.actor_name, e.data) for e in JournalEntry.objects.filter(action__startswith="loop_").order_by("id")]
    assert entries == [
        ("loop_paused", "operator", "carol", {"loop": "heartbeat", "note": "agent failing", "via": "api",
                                              "tokenLabel": "pager", "until": "2026-12-01T00:00:00Z"}),
        ("loop_resumed", "operator", "carol", {"loop": "heartbeat", "note": "fixed", "via": "api", "tokenLabel": "pager",
                                               "coveredSlots": 2}),
    ]


def test_the_refusals(carol_token, victor_token):
    assert post("/api/loops/heartbeat/pause", victor_token, {"note": "x"}) == (
        403, {"error": "permission_denied", "detail": "victor lacks the control_loop permission"})
    assert post("/api/loops/heartbeat/pause", SHARED, {"note": "x"})[1]["error"] == "person_required"
    assert post("/api/loops/nope/pause", carol_token, {"note": "x"}) == (
        404, {"error": "unknown_loop", "detail": "no loop named 'nope' in the registry in force"})
    assert post("/api/loops/heartbeat/pause", carol_token, {}) == (
        400, {"error": "note_required", "detail": "a pause needs a note saying why the loop is paused"})
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x", "extra": 1})[1]["error"] == "invalid_body"
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x", "until": "tomorrow"})[1]["error"] == "invalid_body"
    assert post("/api/loops/heartbeat/resume", carol_token, {}) == (409, {"error": "not_paused", "detail": "heartbeat is not paused"})
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x", "until": "2026-11-30T21:05:00Z"}) == (
        400, {"error": "until_in_past", "detail": "until 2026-11-30T21:05:00Z is not after now (2026-11-30T21:05:00Z)"})
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x", "until": "9999-12-31T00:00:00Z"}) == (
        400, {"error": "until_too_far", "detail": "until 9999-12-31T00:00:00Z is more than 30 days ahead: "
                                                  "to stop a loop for longer, disable it in the registry"})
    assert post("/api/loops/reaper/pause", carol_token, {"note": "x"})[0:1] == (409,)
    assert not LoopPause.objects.exists()


def test_a_trigger_admits_one_event_per_request_id_and_answers_with_the_proposal(carol_token):
    body = {"note": "after the fix", "requestId": "req-0123456789"}
    status, first = post("/api/loops/heartbeat/trigger", carol_token, body, "2026-11-30T21:07:00Z")
    assert status == 201
    proposal = first.pop("proposal")
    assert first == {"loop": "heartbeat", "eventId": "manual:heartbeat:req-0123456789", "duplicate": False,
                     "planning": {"outcome": "PROPOSED", "reason": ""}}
    assert (proposal["status"], proposal["eventId"]) == ("pending", "manual:heartbeat:req-0123456789")
    status, again = post("/api/loops/heartbeat/trigger", carol_token, body, "2026-11-30T21:07:01Z")
    assert (status, again["duplicate"], again["proposal"]["id"]) == (200, True, proposal["id"])
    entry = JournalEntry.objects.get(action="loop_triggered")
    assert (entry.actor, entry.actor_name, entry.data) == ("operator", "carol", {
        "loop": "heartbeat", "eventId": "manual:heartbeat:req-0123456789", "via": "api", "note": "after the fix",
        "tokenLabel": "pager",
    })


def test_trigger_refusals_answer_with_their_codes(carol_token, victor_token):
    assert post("/api/loops/heartbeat/trigger", carol_token, {"requestId": 7}) == (
        400, {"error": "invalid_body", "detail": "note, key and requestId are strings"})
    assert post("/api/loops/heartbeat/trigger", carol_token, {"slot": "x"})[1]["error"] == "invalid_body"
    assert post("/api/loops/nope/trigger", carol_token, {}) == (
        404, {"error": "unknown_loop", "detail": "no loop named 'nope' in the registry in force"})
    assert post("/api/loops/heartbeat/trigger", victor_token, {}) == (
        403, {"error": "permission_denied", "detail": "victor lacks the control_loop permission"})
    assert post("/api/loops/heartbeat/trigger", SHARED, {})[1]["error"] == "person_required"
    tick("2026-11-30T21:00:05Z")
    status, body = post("/api/loops/heartbeat/trigger", carol_token, {}, "2026-11-30T21:07:00Z")
    assert (status, body["error"]) == (409, "previous_run_in_flight")


def test_the_api_judges_a_pause_by_the_registry_on_disk_not_the_one_its_process_loaded_first(carol_token, settings, monkeypatch):
    # The web and API processes look at the files as intake does (at most once every
    # CHANGE_CHECK_SECONDS, here every request): the CLI and the API refuse alike.
    monkeypatch.setattr(sys.modules["runtime.registry.store"], "CHANGE_CHECK_SECONDS", 0.0)
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x"})[0] == 200
    assert post("/api/loops/heartbeat/resume", carol_token, {})[0] == 200
    (settings.FACTORY_CONFIG_DIR / "schedule.yaml").write_text(HOURLY_HEARTBEAT + "    enabled: false\n")
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x"}) == (
        409, {"error": "loop_disabled", "detail": "heartbeat is disabled in the registry: there is nothing to pause"})
    (settings.FACTORY_CONFIG_DIR / "schedule.yaml").write_text(HOURLY_HEARTBEAT)
    assert post("/api/loops/heartbeat/pause", carol_token, {"note": "x"})[0] == 200
