"""Previews in the inbox: the proposal's page, the confirmation, the list's "would do" and
"Preview again" (docs/web.md, "Previews")."""

from unittest import mock

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from runtime.models import JournalEntry, Proposal
from runtime.preview_model import Preview
from tests.conftest import at
from tests.helpers import factory_root, run_previews, tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
DESCRIPTION = "Moves claim files whose heartbeat is older than the stale limit to claims/reaped/."


@pytest.fixture
def proposal(registry_files, settings, tmp_path):
    """A pending reaper proposal whose preview found T-7 stale; the database's clock says 21:00:12Z then."""
    settings.FACTORY_ROOT = factory_root(tmp_path / "root")
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    assert run_previews("2026-11-30T21:00:12Z") == 1
    return Proposal.objects.get()


def clock_at(instant: str):
    return mock.patch("runtime.admin.proposal_previews.clock.database_now", lambda: at(instant))


def decide_url(proposal, decision="approve"):
    return reverse("admin:runtime_proposal_decide", args=[proposal.pk, decision])


def test_the_confirmation_shows_the_description_then_what_the_preview_found_and_its_age(client, approver, proposal):
    client.force_login(approver)
    with clock_at("2026-11-30T21:03:12Z"):
        page = client.get(decide_url(proposal)).content.decode()
    assert page.index(DESCRIPTION) < page.index("reaper.py")
    assert "<strong>WOULD_REAP</strong>: 1 stale claim(s) would be reaped" in page
    assert "&quot;ticket&quot;: &quot;T-7&quot;" in page
    assert ('Previewed 3 m 00 s ago (<time datetime="2026-11-30T21:00:12Z" title="2026-11-30 21:00:12 UTC" data-relative="off">'
            '2026-11-30 21:00:12 UTC</time>).') in page
    assert "Older than" not in page
    assert "The run evaluates again when it runs: what it changes then may differ from this." in page
    assert page.index("WOULD_REAP") < page.index("Yes, approve and run")


def test_a_stale_preview_says_so_and_offers_to_preview_again(client, approver, proposal, settings):
    client.force_login(approver)
    with clock_at("2026-11-30T21:15:13Z"):
        page = client.get(decide_url(proposal)).content.decode()
    assert "Previewed 15 m 01 s ago" in page
    assert "Older than 15 m 00 s: what it finds now may differ — preview again before you decide." in page
    assert "Preview again" in page


def test_a_failed_preview_is_shown_failed_and_approving_stays_possible(client, approver, proposal):
    Preview.objects.filter(proposal=proposal).update(status="failed", reason="timeout",
                                                     detail="killed at its time-out of 60 s", outcome="", summary="")
    client.force_login(approver)
    page = client.get(decide_url(proposal)).content.decode()
    assert "The preview failed: timeout — killed at its time-out of 60 s." in page
    assert "Approving is still possible; nobody has seen what this run would change." in page
    assert "Yes, approve and run" in page


def test_the_proposal_page_shows_the_preview_and_only_an_approver_may_ask_again(client, approver, viewer, proposal):
    page_url = reverse("admin:runtime_proposal_change", args=[proposal.pk])
    client.force_login(viewer)
    seen = client.get(page_url).content.decode()
    assert "WOULD_REAP" in seen and DESCRIPTION in seen and "Preview again" not in seen
    again_url = reverse("admin:runtime_proposal_preview_again", args=[proposal.pk])
    assert client.post(again_url).status_code == 403
    client.force_login(approver)
    assert "Preview again" in client.get(page_url).content.decode()
    asked = client.post(again_url, {"next": page_url})
    assert (asked.status_code, asked["Location"]) == (302, page_url)
    assert [str(m) for m in get_messages(asked.wsgi_request)] == [
        "Preview asked for: a worker runs the dry run within seconds; nothing changes."]
    assert Preview.objects.get(proposal=proposal).status == "pending"
    assert JournalEntry.objects.get(action="proposal_preview_requested").actor_name == "alice"
    assert client.get(again_url).status_code == 405


def test_with_htmx_asking_again_answers_the_block_which_polls_while_the_preview_waits(client, approver, proposal):
    client.force_login(approver)
    again_url = reverse("admin:runtime_proposal_preview_again", args=[proposal.pk])
    block = client.post(again_url, headers={"HX-Request": "true"}).content.decode()
    assert 'data-preview-status="pending"' in block
    assert "Waiting for a worker to preview it (1 preview waiting)…" in block
    assert 'hx-trigger="every 2s"' in block and "Preview again</button>" not in block
    refused = client.post(again_url, headers={"HX-Request": "true"}).content.decode()
    assert f"Not asked: proposal {proposal.pk}&#x27;s preview is pending." in refused
    run_previews("2026-11-30T21:00:20Z")
    done = client.get(reverse("admin:runtime_proposal_preview", args=[proposal.pk])).content.decode()
    assert 'data-preview-status="done"' in done and "hx-trigger" not in done


def test_the_inbox_list_has_a_would_do_column(client, approver, proposal):
    client.force_login(approver)
    page = client.get(reverse("admin:runtime_proposal_changelist")).content.decode()
    assert "Would do" in page
    assert "WOULD_REAP: 1 stale claim(s) would be reaped" in page


def test_a_proposal_left_out_of_the_queue_reads_not_previewed_with_the_count_in_the_list(client, approver, proposal):
    Preview.objects.all().delete()
    client.force_login(approver)
    page = client.get(reverse("admin:runtime_proposal_changelist")).content.decode()
    assert "not previewed: 0 waiting; ask for a preview to queue one" in page


def test_the_run_page_shows_the_preview_its_approver_saw_beside_what_the_run_did(client, approver, proposal):
    from runtime.models import Run
    from runtime.services.approval import approve_proposal
    from tests.helpers import work_all

    approve_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:01:00Z"))
    with mock.patch("runtime.services.execution.database_now", lambda: at("2026-11-30T21:01:05Z")):
        work_all(clock=lambda: at("2026-11-30T21:01:05Z"))
    run = Run.objects.get()
    client.force_login(approver)
    page = client.get(reverse("admin:runtime_run_change", args=[run.pk])).content.decode()
    assert ("<tr><th>previewed</th><td>WOULD_REAP: 1 stale claim(s) would be reaped (ended 2026-11-30T21:00:12Z)</td>"
            "</tr><tr><th>the run</th><td>REAPED: reaped 1 stale claim(s)</td></tr>") in page
