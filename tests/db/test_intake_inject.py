"""``inject --github-event KIND --delivery ID FILE``: replaying a delivery through the same intake (docs/intake.md).

That a replay translates exactly like POST /github is ``http/test_intake_replay_parity.py``.
"""

import json
import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.models import Event, JournalEntry
from tests.github import GITHUB, REPOS_YAML, SECRET, inject

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def repos(settings, registry_files):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = SECRET
    registry_files.write_config("repos.yaml", REPOS_YAML)


def test_replay_of_a_probot_envelope_payload_is_a_ci_failure(tmp_path):
    envelope = json.loads((GITHUB / "workflow_run.completed.failure-push.probot-envelope.json").read_bytes())
    body = tmp_path / "delivery.json"
    body.write_text(json.dumps(envelope["payload"]))
    code, out, _ = inject("--github-event", envelope["name"], "--delivery", envelope["id"], str(body))
    assert (code, out.strip()) == (0, f"admitted: {envelope['id']}")
    event = Event.objects.get()
    assert (event.type, event.subject, event.payload) == (
        "github.workflow-run.failed", "ci", {"repo": "clee2000/random-testing", "runId": 3206737417},
    )
    assert JournalEntry.objects.get(event=event).actor == "inject"


def test_replaying_twice_is_a_duplicate():
    path = str(GITHUB / "pull_request.opened.json")
    assert inject("--github-event", "pull_request", "--delivery", "d", path)[0] == 0
    code, out, _ = inject("--github-event", "pull_request", "--delivery", "d", path)
    assert (code, out.strip()) == (0, "duplicate: d was already admitted; nothing new was admitted")
    assert Event.objects.count() == 1


def test_replay_without_a_delivery_id_is_refused_like_the_webhook():
    code, _, err = inject("--github-event", "pull_request", str(GITHUB / "pull_request.opened.json"))
    assert code == 2 and err.startswith("refused: missing_delivery_id: ")
    assert Event.objects.count() == 0


def test_replay_of_a_body_that_is_not_json_is_refused(tmp_path):
    (tmp_path / "bad.json").write_bytes(b"{nope")
    code, _, err = inject("--github-event", "pull_request", "--delivery", "d", str(tmp_path / "bad.json"))
    assert code == 2 and err.startswith("refused: invalid_json: ")


def test_replay_with_an_ambiguous_head_is_refused(tmp_path):
    payload = json.loads((GITHUB / "workflow_run.completed.pull_request-success.json").read_bytes())
    second = json.loads(json.dumps(payload["workflow_run"]["pull_requests"][0]))
    second["number"] = 47
    payload["workflow_run"]["pull_requests"].append(second)
    (tmp_path / "d.json").write_text(json.dumps(payload))
    code, _, err = inject("--github-event", "workflow_run", "--delivery", "d", str(tmp_path / "d.json"))
    assert code == 2 and err.startswith("refused: ambiguous_pull_request_head: ")


def test_delivery_without_github_event_is_a_usage_error():
    with pytest.raises(CommandError):
        call_command("inject", "--delivery", "d", str(GITHUB / "ping.json"))


def test_plain_envelope_injection_still_works(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    (tmp_path / "e.json").write_text(json.dumps({
        "schemaVersion": "factory.event/v1", "eventId": "gh-replay-1", "type": "factory.merge.requested",
        "source": "github", "subject": "hello", "occurredAt": "2026-11-30T21:00:00Z",
        "correlationId": "gh-replay-1", "payload": {"repo": "hello"},
    }))
    assert inject(str(tmp_path / "e.json"))[:2] == (0, "admitted: gh-replay-1\n")
