"""Interrupted runs in the admin inbox (docs/design.md §8, §10): first in the list, retried or closed by an operator."""

import pytest
from django.urls import reverse

from runtime.models import JournalEntry, Proposal, Run
from runtime.services.approval import approve_proposal
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from tests.conftest import at
from tests.helpers import inject, tick

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:runtime_run_changelist")
NOW = at("2026-11-30T21:01:00Z")


@pytest.fixture
def runs(registry_files, approver):
    """An older interrupted reaper run, then a newer queued non-mutating run."""
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n")
    tick("2026-11-30T21:00:10Z")
    reaper = approve_proposal(Proposal.objects.get().pk, user=approver, now=NOW)
    start_run(claim_next_run(worker="w1", now=NOW, lease_seconds=60), worker="w1", now=NOW)
    fail_attempt(reaper.pk, reason="lease_expired", now=NOW, interrupted=True)
    inject("scan-1", "factory.work.requested", {"repo": "hello"})
    tick("2026-11-30T21:02:10Z")
    return Run.objects.get(pk=reaper.pk), Run.objects.exclude(pk=reaper.pk).get()


def test_interrupted_runs_come_first_and_filter_by_status(client, approver, runs):
    interrupted, queued = runs
    client.force_login(approver)
    assert [r.pk for r in client.get(CHANGELIST).context["cl"].result_list] == [interrupted.pk, queued.pk]
    filtered = client.get(CHANGELIST, {"status__exact": "interrupted"})
    assert [r.pk for r in filtered.context["cl"].result_list] == [interrupted.pk]


def test_retrying_in_the_admin_confirms_then_records_the_operator(client, approver, runs):
    interrupted, _ = runs
    client.force_login(approver)
    confirm = client.post(CHANGELIST, {"action": "retry_selected", "_selected_action": [interrupted.pk]})
    assert confirm.status_code == 200 and "Yes, retry" in confirm.content.decode()
    assert Run.objects.get(pk=interrupted.pk).status == "interrupted"
    done = client.post(CHANGELIST, {"action": "retry_selected", "_selected_action": [interrupted.pk], "confirm": "yes"})
    assert done.status_code == 302
    assert Run.objects.get(pk=interrupted.pk).status == "queued"
    entry = JournalEntry.objects.get(action="run_retried")
    assert (entry.actor, entry.actor_name, entry.run_id, entry.data) == (
        "operator", "alice", interrupted.pk, {"via": "admin", "attempt": 1, "maxAttempts": 2}
    )


def test_closing_in_the_admin_records_the_note(client, approver, runs):
    interrupted, _ = runs
    client.force_login(approver)
    client.post(CHANGELIST, {"action": "close_selected", "_selected_action": [interrupted.pk], "confirm": "yes", "note": "done by hand"})
    closed = Run.objects.get(pk=interrupted.pk)
    assert (closed.status, closed.reason, closed.summary) == ("abandoned", "closed_by_operator", "done by hand")
    entry = JournalEntry.objects.get(action="run_closed")
    assert (entry.actor, entry.actor_name, entry.data) == ("operator", "alice", {"via": "admin", "note": "done by hand"})


def test_a_user_without_the_permission_cannot_retry_or_close(client, viewer, runs):
    interrupted, _ = runs
    client.force_login(viewer)
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and "retry_selected" not in page.content.decode()
    for action in ("retry_selected", "close_selected"):
        response = client.post(CHANGELIST, {"action": action, "_selected_action": [interrupted.pk], "confirm": "yes"})
        assert response.status_code in (200, 302)
    assert Run.objects.get(pk=interrupted.pk).status == "interrupted"
    assert not JournalEntry.objects.filter(action__in=["run_retried", "run_closed"]).exists()


def test_resolving_a_run_that_is_not_interrupted_says_so(client, approver, runs):
    _, queued = runs
    client.force_login(approver)
    response = client.post(
        CHANGELIST, {"action": "close_selected", "_selected_action": [queued.pk], "confirm": "yes"}, follow=True
    )
    assert "1 selected run(s) were not interrupted and were left alone." in response.content.decode()
    assert Run.objects.get(pk=queued.pk).status == "queued"


def test_an_interrupted_runs_page_has_no_admin_close_link_beside_its_decisions(client, approver, runs):
    interrupted, _ = runs
    client.force_login(approver)
    page = client.get(f"/admin/runtime/run/{interrupted.pk}/change/").content.decode()
    assert 'class="closelink"' not in page and 'class="submit-row"' not in page
