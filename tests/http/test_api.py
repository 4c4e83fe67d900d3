"""The approval API (docs/api.md): reads, decisions as a person, and every refusal with its exact body."""

import io
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from factory_site.http_worker import RequestReadTimeout
from ops.api.tokens import create_token
from runtime.listing import event_item, proposal_item, run_item
from runtime.models import Event, JournalEntry, Proposal, Run
from runtime.services.approval import approve_proposal
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from tests.conftest import at
from tests.helpers import PREVIEW_WAITING, tick

pytestmark = pytest.mark.django_db

SHARED = "a-long-random-shared-token"
WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOW = at("2026-11-30T22:01:00Z")


@pytest.fixture
def proposals(registry_files, settings):
    """Two pending proposals of the watched, singleton reaper loop, oldest first."""
    settings.FACTORY_API_TOKEN = SHARED
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    return list(Proposal.objects.order_by("id"))


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def alice_token(approver) -> str:
    return create_token(approver, "phone", by=approver, now=NOW)[1]


@pytest.fixture
def victor_token(viewer) -> str:
    return create_token(viewer, "laptop", by=viewer, now=NOW)[1]


def post(path: str, token: str | None = None, body=None, client=None, **extra):
    headers = bearer(token) if token else {}
    return (client or Client()).post(path, data=body if body is not None else {}, content_type="application/json",
                                     headers=headers, **extra)


def error(response) -> tuple[int, dict]:
    return response.status_code, response.json()


def cells(line: str) -> list[str]:
    """A line of a command's text table as its cells (two spaces or more between them)."""
    return re.split(r"\s{2,}", line.strip())


# --- reads ---------------------------------------------------------------------------------


def test_the_shared_token_lists_proposals_newest_first_as_the_cli_does(client, proposals):
    response = client.get("/api/proposals", headers=bearer(SHARED))
    assert response.status_code == 200
    assert response.json() == {
        "count": 2, "next": None, "previous": None,
        "results": [proposal_item(p) for p in reversed(proposals)],
    }


def test_lists_are_paged(client, proposals):
    first = client.get("/api/proposals?pageSize=1", headers=bearer(SHARED)).json()
    assert (first["count"], [p["id"] for p in first["results"]]) == (2, [proposals[1].pk])
    assert first["next"] == "http://testserver/api/proposals?page=2&pageSize=1"
    second = client.get(first["next"], headers=bearer(SHARED)).json()
    assert [p["id"] for p in second["results"]] == [proposals[0].pk]
    assert error(client.get("/api/proposals?page=3&pageSize=1", headers=bearer(SHARED))) == (
        404, {"error": "not_found", "detail": "Invalid page."})


@pytest.mark.parametrize(("query", "detail"), [
    ("pageSize=0", "?pageSize= is a whole number from 1 to 500, not '0'"),
    ("pageSize=501", "?pageSize= is a whole number from 1 to 500, not '501'"),
    ("pageSize=abc", "?pageSize= is a whole number from 1 to 500, not 'abc'"),
    ("pageSize=-3", "?pageSize= is a whole number from 1 to 500, not '-3'"),
    ("page=0", "?page= is a whole number from 1 to 1000000000, not '0'"),
    ("page=abc", "?page= is a whole number from 1 to 1000000000, not 'abc'"),
    ("page=", "?page= is a whole number from 1 to 1000000000, not ''"),
])
def test_a_bad_paging_value_is_refused_naming_it_as_schedules_refuses_it(client, proposals, query, detail):
    for path in ("/api/proposals", "/api/events", "/api/runs"):
        assert error(client.get(f"{path}?{query}", headers=bearer(SHARED))) == (
            400, {"error": "invalid_parameter", "detail": detail})


def test_lists_filter_by_status_and_loop(client, proposals, approver):
    approve_proposal(proposals[1].pk, user=approver, now=NOW)
    pending = client.get("/api/proposals?status=superseded&loop=reaper", headers=bearer(SHARED)).json()
    assert [p["id"] for p in pending["results"]] == [proposals[0].pk]
    assert client.get("/api/proposals?loop=heartbeat", headers=bearer(SHARED)).json()["count"] == 0
    runs = client.get("/api/runs?status=queued", headers=bearer(SHARED)).json()
    assert runs["results"] == [run_item(Run.objects.get())]
    events = client.get("/api/events?type=factory.reaper.requested", headers=bearer(SHARED)).json()
    assert events["count"] == Event.objects.filter(type="factory.reaper.requested").count()


@pytest.mark.parametrize("query, detail", [
    ("/api/proposals?status=done", "?status= is one of pending, approved, rejected, superseded"),
    ("/api/runs?status=queued%00", "?status= is one of queued, claimed, running, succeeded, failed, abandoned, interrupted"),
    ("/api/runs?loop=re%00aper", "?loop= takes at most 63 characters and no NUL"),
    ("/api/events?type=" + "t" * 201, "?type= takes at most 200 characters and no NUL"),
])
def test_a_bad_filter_is_400(client, proposals, query, detail):
    assert error(client.get(query, headers=bearer(SHARED))) == (400, {"error": "invalid_filter", "detail": detail})


def test_one_row_of_each_kind_reads_as_its_item(client, proposals, approver):
    run = approve_proposal(proposals[1].pk, user=approver, now=NOW)
    event = proposals[1].event
    assert client.get(f"/api/proposals/{proposals[1].pk}", headers=bearer(SHARED)).json() == proposal_item(
        Proposal.objects.get(pk=proposals[1].pk))
    assert client.get(f"/api/runs/{run.pk}", headers=bearer(SHARED)).json() == run_item(Run.objects.get(pk=run.pk))
    assert client.get(f"/api/events/{event.pk}", headers=bearer(SHARED)).json() == event_item(event)


@pytest.mark.parametrize("path, detail", [
    ("/api/proposals/999", "there is no proposal 999"),
    ("/api/runs/999", "there is no run 999"),
    ("/api/events/999", "there is no event 999"),
    ("/api/proposals/abc", "there is no proposal 'abc': ids are positive integers"),
    ("/api/runs/0", "there is no run '0': ids are positive integers"),
    ("/api/events/99999999999999999999", "there is no event '99999999999999999999': ids are positive integers"),
    ("/api/nothing/here", "there is no route /api/nothing/here: see /api/docs/"),
])
def test_an_unknown_id_or_route_is_404(client, proposals, path, detail):
    assert error(client.get(path, headers=bearer(SHARED))) == (404, {"error": "not_found", "detail": detail})


def test_reading_needs_credentials(client, proposals, outsider, victor_token):
    assert error(client.get("/api/proposals")) == (
        401, {"error": "not_authenticated", "detail": "Authentication credentials were not provided."})
    assert client.get("/api/proposals").headers["WWW-Authenticate"] == 'Bearer realm="factory"'
    assert error(client.get("/api/proposals", headers=bearer("fct_not-a-token"))) == (
        401, {"error": "authentication_failed",
              "detail": "the bearer token is neither a live API token nor FACTORY_API_TOKEN"})
    assert error(client.get("/api/proposals", headers={"Authorization": "Bearer two words"})) == (
        401, {"error": "authentication_failed", "detail": "write the header as: Authorization: Bearer <token>"})
    assert client.get("/api/proposals", headers=bearer(victor_token)).status_code == 200
    client.force_login(outsider)
    assert error(client.get("/api/proposals")) == (
        403, {"error": "permission_denied",
              "detail": "only staff users, their API tokens and FACTORY_API_TOKEN may read the API"})


def test_an_unset_shared_token_is_never_matched(client, proposals, settings):
    settings.FACTORY_API_TOKEN = ""
    assert client.get("/api/proposals", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/api/proposals", headers=bearer("x")).status_code == 401


def test_reads_take_get_only(client, proposals):
    response = client.delete("/api/proposals", headers=bearer(SHARED))
    assert error(response) == (405, {"error": "method_not_allowed", "detail": 'Method "DELETE" not allowed.'})


# --- decisions -----------------------------------------------------------------------------


def test_approving_with_a_persons_token_records_the_operator_via_api_and_the_label(proposals, alice_token):
    response = post(f"/api/proposals/{proposals[1].pk}/approve", alice_token, {"note": "looks right"})
    assert response.status_code == 200
    run = Run.objects.get()
    assert response.json() == {"proposal": proposal_item(Proposal.objects.get(pk=proposals[1].pk)),
                               "run": run_item(run)}
    assert (run.actor, run.approved_by.username, run.proposal.note) == ("operator", "alice", "looks right")
    entry = JournalEntry.objects.get(action="proposal_approved")
    assert (entry.actor, entry.actor_name, entry.data) == (
        "operator", "alice", {"via": "api", "tokenLabel": "phone", "note": "looks right", "preview": PREVIEW_WAITING})
    assert Proposal.objects.get(pk=proposals[0].pk).status == "superseded"


def test_rejecting_with_a_token_takes_an_empty_body(proposals, alice_token):
    response = post(f"/api/proposals/{proposals[0].pk}/reject", alice_token)
    assert response.status_code == 200
    assert response.json() == {"proposal": proposal_item(Proposal.objects.get(pk=proposals[0].pk))}
    assert response.json()["proposal"]["status"] == "rejected"
    assert JournalEntry.objects.get(action="proposal_rejected").data == {"via": "api", "tokenLabel": "phone"}


def test_a_session_decides_with_its_csrf_token(proposals, approver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    refused = post(f"/api/proposals/{proposals[1].pk}/approve", client=client)
    assert error(refused) == (403, {"error": "csrf_failed", "detail": "CSRF Failed: CSRF cookie not set."})
    client.get("/admin/")
    csrf = client.cookies["csrftoken"].value
    done = post(f"/api/proposals/{proposals[1].pk}/approve", client=client, HTTP_X_CSRFTOKEN=csrf)
    assert done.status_code == 200
    assert JournalEntry.objects.get(action="proposal_approved").data == {"via": "api", "preview": PREVIEW_WAITING}


def test_the_shared_token_never_decides(proposals):
    assert error(post(f"/api/proposals/{proposals[1].pk}/approve", SHARED)) == (403, {
        "error": "person_required",
        "detail": "FACTORY_API_TOKEN is not a person: decide with your own API token (manage.py api_token create) "
                  "or a session"})
    assert Proposal.objects.filter(status="pending").count() == 2


def test_deciding_needs_the_permission(proposals, victor_token):
    assert error(post(f"/api/proposals/{proposals[1].pk}/reject", victor_token)) == (
        403, {"error": "permission_denied", "detail": "victor lacks the approve_proposal permission"})
    assert error(post(f"/api/proposals/{proposals[1].pk}/approve")) == (
        401, {"error": "not_authenticated", "detail": "Authentication credentials were not provided."})


def test_a_revoked_token_is_refused(proposals, approver, alice_token):
    from ops.api.tokens import revoke_token
    from ops.models import ApiToken

    revoke_token(ApiToken.objects.get().pk, by=approver, now=NOW)
    assert error(post(f"/api/proposals/{proposals[1].pk}/approve", alice_token))[0] == 401


def test_an_inactive_persons_token_is_refused(proposals, approver, alice_token):
    approver.is_active = False
    approver.save(update_fields=["is_active"])
    assert error(post(f"/api/proposals/{proposals[1].pk}/approve", alice_token))[0] == 401


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_a_note_with_a_lone_surrogate_is_refused_and_the_proposal_stays_pending(proposals, alice_token, action):
    proposal = proposals[1]
    assert error(post(f"/api/proposals/{proposal.pk}/{action}", alice_token, '{"note": "half \\ud800"}')) == (
        400, {"error": "invalid_note", "detail": "the note holds a lone surrogate, which is not Unicode text"})
    proposal.refresh_from_db()
    assert proposal.status == "pending"


@pytest.mark.parametrize(("body", "detail"), [
    ('{"note": "approve", "note": "reject"}', "JSON parse error - the body is not JSON: the key 'note' appears twice in one object"),
    ('{"note": 1e400}', "JSON parse error - the body is not JSON: the number 1e400 is too large for a 64-bit float"),
    (b'{"note": "\xff"}', "JSON parse error - the body is not UTF-8: invalid start byte at byte 10"),
])
def test_a_body_that_is_not_strict_json_is_a_parse_error_and_the_proposal_stays_pending(proposals, alice_token, body, detail):
    # DRF's own parser kept the last of a key given twice: the journal would have held a
    # note the person may not have meant (ops.api.parsers).
    proposal = proposals[1]
    assert error(post(f"/api/proposals/{proposal.pk}/approve", alice_token, body)) == (
        400, {"error": "parse_error", "detail": detail})
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_a_note_with_a_nul_is_refused_and_the_proposal_stays_pending(proposals, alice_token):
    proposal = proposals[1]
    assert error(post(f"/api/proposals/{proposal.pk}/reject", alice_token, {"note": "nope \u0000"})) == (
        400, {"error": "invalid_note", "detail": "the note holds U+0000 (NUL), which no journal entry can carry"})
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_a_note_with_an_escape_sequence_is_refused_and_the_proposal_stays_pending(proposals, alice_token):
    proposal = proposals[1]
    assert error(post(f"/api/proposals/{proposal.pk}/approve", alice_token, {"note": "ok \u001b[31mred"})) == (
        400, {"error": "invalid_note",
              "detail": "the note holds the control character U+001B: write plain text (tabs and line breaks are kept)"})
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_a_body_over_the_upload_limit_is_a_json_413(proposals, alice_token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert error(post(f"/api/proposals/{proposals[1].pk}/approve", alice_token, {"note": "x" * 1500})) == (
        413, {"error": "payload_too_large", "detail": "the body is 1512 bytes; this route takes at most 1000"})


class StalledBody(io.RawIOBase):
    """A request body whose read runs past the HTTP worker's read deadline, as
    ``factory_site.http_worker`` raises it from the socket."""

    def readable(self):
        return True

    def read(self, size=-1):
        raise RequestReadTimeout("the request did not arrive within 5 s")


def test_a_body_that_stalls_is_a_json_408_logged_as_the_clients_fault_and_nothing_is_decided(
        proposals, alice_token, caplog):
    # It was a 500 internal_error, logged at ERROR with a traceback (DRF read request.body).
    proposal, journal = proposals[1], JournalEntry.objects.count()
    response = post(f"/api/proposals/{proposal.pk}/approve", alice_token, b"{",
                    CONTENT_LENGTH="100", **{"wsgi.input": StalledBody()})
    assert error(response) == (408, {
        "error": "request_timeout",
        "detail": "the body did not arrive within the server's read time-out; send it again"})
    assert [r.levelname for r in caplog.records if r.name == "django.request"] == ["WARNING"]
    proposal.refresh_from_db()
    assert (proposal.status, JournalEntry.objects.count()) == ("pending", journal)


def test_a_body_shorter_than_its_content_length_is_refused_and_nothing_is_decided(proposals, alice_token):
    # The client closed its side after 17 of the 500 bytes: the reject was taken and journaled.
    proposal, journal = proposals[1], JournalEntry.objects.count()
    body = b'{"note": "trunc"}'
    response = post(f"/api/proposals/{proposal.pk}/reject", alice_token, body,
                    CONTENT_LENGTH="500", **{"wsgi.input": io.BytesIO(body)})
    assert error(response) == (400, {
        "error": "bad_request", "detail": "the body ended after 17 of the 500 bytes its Content-Length declared"})
    proposal.refresh_from_db()
    assert (proposal.status, JournalEntry.objects.count()) == ("pending", journal)


def test_the_documented_refusals(proposals, alice_token, approver):
    base = f"/api/proposals/{proposals[1].pk}"
    assert error(post(base + "/approve", alice_token, {"note": "x" * 2001})) == (
        400, {"error": "note_too_long", "detail": "the note has 2001 characters; at most 2000"})
    assert error(post(base + "/approve", alice_token, {"note": 3})) == (
        400, {"error": "invalid_body", "detail": "note is a string"})
    assert error(post(base + "/approve", alice_token, {"comment": "x"})) == (
        400, {"error": "invalid_body", "detail": 'the body is {} or {"note": "<text>"}'})
    assert error(post(base + "/approve", alice_token, ["x"])) == (
        400, {"error": "invalid_body", "detail": 'the body is {} or {"note": "<text>"}'})
    assert error(post(base + "/approve", alice_token, b"{"))[1]["error"] == "parse_error"
    assert error(Client().post(base + "/approve", data="note=x", content_type="text/plain", headers=bearer(alice_token))) == (
        415, {"error": "unsupported_media_type", "detail": 'Unsupported media type "text/plain" in request.'})
    assert error(post("/api/proposals/999/approve", alice_token)) == (
        404, {"error": "not_found", "detail": "there is no proposal 999"})
    assert post(base + "/approve", alice_token).status_code == 200
    assert error(post(base + "/reject", alice_token)) == (
        409, {"error": "not_pending", "detail": f"proposal {proposals[1].pk} is approved, not pending"})
    assert error(Client().get(base + "/approve", headers=bearer(alice_token))) == (
        405, {"error": "method_not_allowed", "detail": 'Method "GET" not allowed.'})


def test_a_singleton_loop_with_a_run_in_flight_keeps_the_proposal_pending(proposals, alice_token, approver):
    run = approve_proposal(proposals[0].pk, user=approver, now=NOW)
    newest = Proposal.objects.filter(status="pending").get()
    assert error(post(f"/api/proposals/{newest.pk}/approve", alice_token)) == (409, {
        "error": "previous_run_in_flight",
        "detail": f"loop reaper has run {run.pk} queued; proposal {newest.pk} stays pending"})
    assert Proposal.objects.get(pk=newest.pk).status == "pending"


@pytest.fixture
def interrupted(proposals, approver):
    """The older proposal's run, interrupted; the newer proposal stays pending."""
    run = approve_proposal(proposals[0].pk, user=approver, now=NOW)
    start_run(claim_next_run(worker="w1", now=NOW, lease_seconds=60), worker="w1", now=NOW)
    fail_attempt(run.pk, reason="lease_expired", now=NOW, interrupted=True)
    return Run.objects.get(pk=run.pk)


def test_an_interrupted_run_awaiting_a_decision_holds_the_loop(interrupted, alice_token):
    newest = Proposal.objects.filter(status="pending").get()
    assert error(post(f"/api/proposals/{newest.pk}/approve", alice_token)) == (409, {
        "error": "previous_run_in_flight",
        "detail": f"loop reaper has run {interrupted.pk} interrupted: retry or close it first; "
                  f"proposal {newest.pk} stays pending"})


def test_retrying_an_interrupted_run(interrupted, alice_token):
    response = post(f"/api/runs/{interrupted.pk}/retry", alice_token)
    assert response.status_code == 200
    assert response.json() == {"run": run_item(Run.objects.get(pk=interrupted.pk))}
    assert response.json()["run"]["status"] == "queued"
    # Queued for attempt 2: the reason is attempt 1's, and says so.
    assert (response.json()["run"]["attempt"], response.json()["run"]["reason"], response.json()["run"]["reasonAttempt"]) == (
        1, "lease_expired", 1)
    entry = JournalEntry.objects.get(action="run_retried")
    assert (entry.actor_name, entry.data) == ("alice", {"via": "api", "tokenLabel": "phone", "attempt": 1, "maxAttempts": 2})
    assert error(post(f"/api/runs/{interrupted.pk}/retry", alice_token)) == (
        409, {"error": "not_interrupted", "detail": f"run {interrupted.pk} is queued, not interrupted"})
    assert error(post(f"/api/runs/{interrupted.pk}/retry", alice_token, {"note": "x"})) == (
        400, {"error": "invalid_body", "detail": "a retry takes no body: send {} or none"})


def test_closing_an_interrupted_run_with_a_note(interrupted, alice_token, victor_token):
    assert error(post(f"/api/runs/{interrupted.pk}/close", victor_token)) == (
        403, {"error": "permission_denied", "detail": "victor lacks the approve_proposal permission"})
    assert error(post(f"/api/runs/{interrupted.pk}/close", SHARED))[1]["error"] == "person_required"
    assert error(post("/api/runs/999/close", alice_token)) == (404, {"error": "not_found", "detail": "there is no run 999"})
    response = post(f"/api/runs/{interrupted.pk}/close", alice_token, {"note": "done by hand"})
    assert response.status_code == 200
    assert (response.json()["run"]["status"], response.json()["run"]["reason"]) == ("abandoned", "closed_by_operator")
    assert JournalEntry.objects.get(action="run_closed").data == {"via": "api", "tokenLabel": "phone", "note": "done by hand"}


def test_a_reason_names_its_attempt_while_a_newer_attempt_is_queued_or_running(client, proposals, approver):
    run = approve_proposal(proposals[0].pk, user=approver, now=NOW)  # the reaper: two attempts

    def listed() -> tuple:
        (item,) = client.get("/api/runs", headers=bearer(SHARED)).json()["results"]
        return item["status"], item["attempt"], item["reason"], item["reasonAttempt"]

    assert listed() == ("queued", 0, None, None)
    start_run(claim_next_run(worker="w1", now=NOW, lease_seconds=60), worker="w1", now=NOW)
    assert fail_attempt(run.pk, reason="timeout", now=NOW) == "queued"
    assert listed() == ("queued", 1, "timeout", 1)
    claim_next_run(worker="w2", now=NOW, lease_seconds=60)
    assert listed() == ("claimed", 2, "timeout", 1)
    start_run(Run.objects.get(pk=run.pk), worker="w2", now=NOW)
    assert listed() == ("running", 2, "timeout", 1)
    out = StringIO()
    call_command("runs", stdout=out)
    assert [cells(line) for line in out.getvalue().splitlines()] == [
        ["id", "status", "definition", "loop", "attempt", "outcome", "reason", "actor", "approved by", "queued",
         "started", "took"],
        [str(run.pk), "running", "reaper@1", "reaper", "2", "-", "attempt 1: timeout", "operator", "alice",
         "2026-11-30T22:01:00Z", "2026-11-30T22:01:00Z", "-"],
    ]
    assert fail_attempt(run.pk, reason="lease_expired", now=NOW) == "abandoned"
    assert listed() == ("abandoned", 2, "lease_expired", 2)
    out = StringIO()
    call_command("runs", stdout=out)
    assert cells(out.getvalue().splitlines()[1]) == [
        str(run.pk), "abandoned", "reaper@1", "reaper", "2", "-", "lease_expired", "operator", "alice",
        "2026-11-30T22:01:00Z", "2026-11-30T22:01:00Z", "0.0 s",
    ]


def test_an_unexpected_failure_is_500_in_json_with_the_request_id(client, proposals, caplog):
    from unittest import mock

    with mock.patch("ops.api.views.ProposalItems", side_effect=RuntimeError("boom")):
        response = client.get("/api/proposals", headers={**bearer(SHARED), "X-Request-Id": "req-42"})
    assert error(response) == (500, {
        "error": "internal_error",
        "detail": "the server failed to answer this request; its log has the cause under this requestId",
        "requestId": "req-42"})
    assert response.headers["X-Request-Id"] == "req-42"
    assert [r.exc_info[1].args for r in caplog.records if r.name == "django.request" and r.exc_info] == [("boom",)]


def test_the_described_shapes_are_the_items_the_api_answers(proposals, approver):
    from ops.api.shapes import EventItemSerializer, ProposalItemSerializer, RunItemSerializer

    run = approve_proposal(proposals[1].pk, user=approver, now=NOW)
    assert set(proposal_item(proposals[0])) == set(ProposalItemSerializer().fields)
    assert set(run_item(run)) == set(RunItemSerializer().fields)
    optional = {name for name, field in EventItemSerializer().fields.items() if not field.required}
    assert set(EventItemSerializer().fields) - optional <= set(event_item(proposals[0].event)) <= set(
        EventItemSerializer().fields)
