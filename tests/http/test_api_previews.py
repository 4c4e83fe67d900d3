"""Previews in the API and the listings: the item's ``description`` and ``preview``, and asking again
(docs/api.md; docs/design.md §8, Previews)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from ops.api.tokens import create_token
from runtime.models import JournalEntry, Proposal
from runtime.preview_model import Preview
from tests.conftest import at
from tests.helpers import factory_root, run_previews, tick
from tests.http.test_api import cells

pytestmark = pytest.mark.django_db

SHARED = "a-long-random-shared-token"
WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
REAPER_DESCRIPTION = ("Moves claim files whose heartbeat is older than the stale limit to claims/reaped/. "
                      "--apply acts; without it the script only reports.")


@pytest.fixture
def proposal(registry_files, settings, tmp_path):
    """A pending reaper proposal whose preview ran at 21:00:12Z (a root without claims: nothing to reap)."""
    settings.FACTORY_API_TOKEN = SHARED
    settings.FACTORY_ROOT = factory_root(tmp_path / "root", stale=())
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    assert run_previews("2026-11-30T21:00:12Z") == 1
    return Proposal.objects.get()


def post(path, token=None, client=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return (client or Client()).post(path, data={}, content_type="application/json", headers=headers)


def test_the_item_carries_the_description_and_what_the_preview_found(client, proposal):
    item = client.get(f"/api/proposals/{proposal.pk}", headers={"Authorization": f"Bearer {SHARED}"}).json()
    assert item["description"] == REAPER_DESCRIPTION
    preview = item["preview"]
    assert {key: preview[key] for key in ("status", "reason", "outcome", "summary", "exitCode", "durationSeconds",
                                          "requestedBy", "startedAt", "finishedAt", "registryDigest")} == {
        "status": "done", "reason": "", "outcome": "NOTHING_TO_REAP", "summary": "0 live claim(s), none stale",
        "exitCode": 0, "durationSeconds": 0.0, "requestedBy": None, "startedAt": "2026-11-30T21:00:12Z",
        "finishedAt": "2026-11-30T21:00:12Z", "registryDigest": proposal.registry_digest,
    }
    assert preview["data"] == {"mode": "dry-run", "staleMinutes": 120, "stale": [], "kept": 0, "unreadable": []}
    assert preview["argv"][-2:] == ["--root", str(proposal.plan["argvValues"]["factoryRoot"])]
    assert json.loads(preview["stdout"].strip().splitlines()[-1])["outcome"] == "NOTHING_TO_REAP"


def test_proposals_json_and_text_show_the_preview(proposal):
    out = StringIO()
    call_command("proposals", "--json", stdout=out)
    [item] = json.loads(out.getvalue())
    assert (item["description"], item["preview"]["status"], item["preview"]["summary"]) == (
        REAPER_DESCRIPTION, "done", "0 live claim(s), none stale")
    text = StringIO()
    call_command("proposals", stdout=text)
    assert cells(text.getvalue().splitlines()[0]) == [
        "id", "status", "definition", "loop", "event", "created", "actor", "decided by", "preview"]
    assert text.getvalue().splitlines()[1].endswith("0 live claim(s), none stale")


def test_a_proposal_left_out_of_the_queue_says_how_many_wait(client, proposal, settings):
    Preview.objects.all().delete()
    item = client.get(f"/api/proposals/{proposal.pk}", headers={"Authorization": f"Bearer {SHARED}"}).json()
    assert {key: item["preview"][key] for key in ("status", "reason", "detail", "outcome")} == {
        "status": "not-previewed", "reason": "queue_full",
        "detail": "not previewed: 0 waiting; ask for a preview to queue one", "outcome": None,
    }


def test_a_person_asks_again_through_the_api(proposal, approver, viewer):
    token = create_token(approver, "phone", by=approver, now=at("2026-11-30T21:00:00Z"))[1]
    response = post(f"/api/proposals/{proposal.pk}/preview", token)
    assert response.status_code == 202
    assert response.json()["proposal"]["preview"]["status"] == "pending"
    assert response.json()["proposal"]["preview"]["requestedBy"] == "alice"
    entry = JournalEntry.objects.get(action="proposal_preview_requested")
    assert (entry.actor_name, entry.data) == ("alice", {"via": "api", "tokenLabel": "phone"})
    again = post(f"/api/proposals/{proposal.pk}/preview", token)
    assert (again.status_code, again.json()["error"]) == (409, "preview_in_progress")

    viewer_token = create_token(viewer, "laptop", by=viewer, now=at("2026-11-30T21:00:00Z"))[1]
    assert post(f"/api/proposals/{proposal.pk}/preview", viewer_token).json()["error"] == "permission_denied"
    assert post(f"/api/proposals/{proposal.pk}/preview", SHARED).json()["error"] == "person_required"
    missing = post("/api/proposals/999999/preview", token)
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")


def test_asking_too_soon_is_429(proposal, approver):
    token = create_token(approver, "phone", by=approver, now=at("2026-11-30T21:00:00Z"))[1]
    assert post(f"/api/proposals/{proposal.pk}/preview", token).status_code == 202
    Preview.objects.filter(proposal=proposal).update(status="done")
    soon = post(f"/api/proposals/{proposal.pk}/preview", token)
    assert (soon.status_code, soon.json()["error"]) == (429, "preview_too_soon")


def test_a_person_asks_again_from_the_cli_and_a_refusal_exits_2(proposal, approver, capsys):
    call_command("preview", str(proposal.pk), "--as", "alice")
    assert capsys.readouterr().out.strip() == (
        f"preview of proposal {proposal.pk} asked for as alice: 1 preview(s) waiting for a worker")
    assert JournalEntry.objects.get(action="proposal_preview_requested").data["via"] == "cli"
    with pytest.raises(SystemExit) as refused:
        call_command("preview", str(proposal.pk), "--as", "alice")
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip() == f"refused: preview_in_progress: proposal {proposal.pk}'s preview is pending"


@pytest.mark.parametrize("body", [{"x": 1}, [1], {"note": "hi"}])
def test_asking_for_a_preview_takes_no_body(proposal, approver, body):
    token = create_token(approver, "phone", by=approver, now=at("2026-11-30T21:00:00Z"))[1]
    response = Client().post(f"/api/proposals/{proposal.pk}/preview", data=body, content_type="application/json",
                             headers={"Authorization": f"Bearer {token}"})
    assert (response.status_code, response.json()) == (400, {
        "error": "invalid_body", "detail": "asking for a preview takes no body: send {} or none"})
    assert Preview.objects.get(proposal=proposal).requested_by is None
