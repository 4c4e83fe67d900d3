"""``inject --github-event KIND --delivery ID FILE``: replay parity with POST /github (docs/intake.md)."""

import pytest

from runtime.models import Event
from tests.github import GITHUB, REPOS_YAML, SECRET, ignored, inject, post

pytestmark = pytest.mark.django_db

DELIVERIES = [
    ("pull_request.opened.json", "pull_request"),
    ("pull_request.opened.null-body.json", "pull_request"),
    ("pull_request.synchronize.json", "pull_request"),
    ("pull_request.ready_for_review.json", "pull_request"),
    ("pull_request.closed.json", "pull_request"),
    ("pull_request.reopened.json", "pull_request"),
    ("workflow_run.completed.pull_request-success.json", "workflow_run"),
    ("workflow_run.completed.fork-empty-pull_requests.json", "workflow_run"),
    ("workflow_run.completed.with-pull-requests.json", "workflow_run"),
    ("workflow_run.in_progress.json", "workflow_run"),
    ("workflow_run.requested.json", "workflow_run"),
    ("ping.json", "ping"),
    ("push.json", "push"),
    ("issues.opened.json", "issues"),
    ("signed/pull_request.opened.body.json", "pull_request"),
    ("signed/workflow_run.in_progress.body.json", "workflow_run"),
]


@pytest.fixture(autouse=True)
def repos(settings, registry_files):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = SECRET
    registry_files.write_config("repos.yaml", REPOS_YAML)


@pytest.mark.parametrize("name, kind", DELIVERIES)
def test_replay_translates_exactly_like_the_webhook(name, kind, caplog):
    path = GITHUB / name
    code, out, err = inject("--github-event", kind, "--delivery", "replayed-1", str(path))
    response = post(path.read_bytes(), kind, delivery="replayed-1")
    if code == 0:
        # The webhook finds the very event the replay admitted, with identical content.
        assert out.startswith("admitted: ")
        assert response.status_code == 200
        assert response.json() == {"admitted": False, "duplicate": True, "eventId": out.split()[1]}
        assert not [r for r in caplog.records if getattr(r, "action", "") == "duplicate_differs"]
        assert Event.objects.get().door == "inject"
    else:
        assert code == 2
        reason = response.json()["reason"]
        assert response.status_code == 200 and response.json() == ignored(reason)
        assert err.strip().startswith(f"ignored: {reason}: ")
        assert Event.objects.count() == 0
