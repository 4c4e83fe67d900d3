"""Deciding where you read and reading a run (docs/design.md §10): a proposal's page has its
decisions and its journal, the confirmation says what will run in words, a run's page has
its output first, times to the second in UTC, its attempts and its links."""

from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from runtime.adapters.base import RunResult
from runtime.admin.records import decision_words
from runtime.models import Event, JournalEntry, Proposal, Run
from runtime.services.approval import approve_proposal
from runtime.services.runs import claim_next_run, fail_attempt, finish_run, start_run
from tests.conftest import SHA, at
from tests.helpers import PREVIEW_WAITING, inject, step, tick
from tests.http.conftest import WATCHED_REAPER

pytestmark = pytest.mark.django_db

APPLY = {"repo": "alpha", "prNumber": 7, "headSha": SHA, "evidence": {"prNumber": 7, "headSha": SHA}}


def decide_url(proposal, decision):
    return reverse("admin:runtime_proposal_decide", args=[proposal.pk, decision])


def test_a_proposal_page_offers_the_decisions_to_an_approver_only(client, approver, viewer, proposals):
    page = reverse("admin:runtime_proposal_change", args=[proposals[1].pk])
    client.force_login(approver)
    body = client.get(page).content.decode()
    assert decide_url(proposals[1], "approve") in body and decide_url(proposals[1], "reject") in body
    assert "what runs" in body and "reaper.py" in body
    client.force_login(viewer)
    body = client.get(page).content.decode()
    assert decide_url(proposals[1], "approve") not in body
    assert client.get(decide_url(proposals[1], "approve")).status_code == 403
    forged = client.post(decide_url(proposals[1], "approve"), {"confirm": "yes"})
    assert forged.status_code == 403
    assert (Run.objects.count(), Proposal.objects.get(pk=proposals[1].pk).status) == (0, "pending")


def test_approving_from_the_page_confirms_in_words_then_records_the_note_and_supersedes(client, approver, proposals):
    older, newer = proposals
    client.force_login(approver)
    confirm = client.get(decide_url(newer, "approve"))
    assert confirm.status_code == 200
    rows = confirm.context["rows"]
    assert [(row["proposal"].pk, row["supersedes"]) for row in rows] == [(newer.pk, [older.pk])]
    assert [label for label, _ in rows[0]["lines"]] == ["what runs", "input", "mutates", "time-out", "attempts"]
    assert "Yes, approve and run" in confirm.content.decode()
    assert Run.objects.count() == 0
    done = client.post(decide_url(newer, "approve"), {"confirm": "yes", "note": "reaped by hand before"})
    run = Run.objects.get()
    assert (done.status_code, done["Location"]) == (302, reverse("admin:runtime_run_change", args=[run.pk]))
    landed = client.get(done["Location"])
    assert [str(m) for m in get_messages(landed.wsgi_request)] == [
        f"1 proposal(s) approved: <a href='{reverse('admin:runtime_run_change', args=[run.pk])}'>run {run.pk}</a> "
        f"(proposal {newer.pk}) queued."]
    entry = JournalEntry.objects.get(action="proposal_approved")
    assert (entry.actor, entry.actor_name, entry.data) == (
        "operator", "alice", {"via": "admin", "note": "reaped by hand before", "preview": PREVIEW_WAITING}
    )
    assert list(Proposal.objects.order_by("id").values_list("status", "note")) == [
        ("superseded", f"superseded by proposal {newer.pk}"), ("approved", "reaped by hand before"),
    ]


def test_an_agent_proposal_is_confirmed_with_its_repo_pr_head_and_input(client, approver, registry_files):
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    tick("2026-11-30T10:00:10Z")
    proposal = Proposal.objects.get(event__uid="op-merge-7")
    client.force_login(approver)
    lines = dict(client.get(decide_url(proposal, "approve")).context["rows"][0]["lines"])
    assert {key: lines[key] for key in ("what runs", "repository", "pull request", "head SHA", "mutates")} == {
        "what runs": "the agent merge-apply@1", "repository": "alpha", "pull request": "7", "head SHA": SHA,
        "mutates": "yes: it changes things outside the runtime; an interrupted attempt waits for a person",
    }


def test_rejecting_from_the_page_and_a_decided_proposal_is_not_offered_again(client, approver, proposals):
    client.force_login(approver)
    client.post(decide_url(proposals[0], "reject"), {"confirm": "yes", "note": "not now"})
    assert Proposal.objects.get(pk=proposals[0].pk).status == "rejected"
    again = client.get(decide_url(proposals[0], "reject"), follow=True)
    assert [str(m) for m in get_messages(again.wsgi_request)][-1] == f"Proposal {proposals[0].pk} is rejected, not pending."
    assert client.get(reverse("admin:runtime_proposal_decide", args=[proposals[0].pk, "delete"])).status_code == 404
    assert client.get(reverse("admin:runtime_proposal_decide", args=[999999, "approve"])).status_code == 404


def test_deciding_from_the_pending_filter_counts_nothing_skipped(client, approver, proposals):
    client.force_login(approver)
    changelist = reverse("admin:runtime_proposal_changelist") + "?status__exact=pending"
    response = client.post(
        changelist, {"action": "reject_selected", "_selected_action": [p.pk for p in proposals], "confirm": "yes"},
        follow=True,
    )
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["2 proposal(s) rejected."]


def test_history_is_the_rows_journal_oldest_first(client, approver, proposals):
    client.force_login(approver)
    history = client.get(reverse("admin:runtime_proposal_history", args=[proposals[0].pk]))
    assert history.status_code == 302
    listing = client.get(history["Location"])
    assert [e.action for e in listing.context["cl"].result_list] == ["proposal_created"]
    assert client.get(reverse("admin:runtime_proposal_history", args=["x"])).status_code == 404


PR_OPEN_ONLY = """
outcomes:
  dispatch@1:
    - results: [{outcome: PR_OPEN, data: {prNumber: 7, headSha: 3f786850e387550fdab836ed7e6dc881de23001b}}]
"""


@pytest.fixture
def finished_run(registry_files, approver, settings, tmp_path):
    """A reaper run whose first attempt was lost and whose second finished with 70 KiB of output."""
    settings.FACTORY_RUNS_DIR = tmp_path
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    run = approve_proposal(Proposal.objects.get().pk, user=approver, now=at("2026-11-30T21:01:00Z"))
    Run.objects.filter(pk=run.pk).update(plan={**run.plan, "mutating": False})
    start_run(claim_next_run(worker="host-a:1:1", now=at("2026-11-30T21:01:05Z"), lease_seconds=60),
              worker="host-a:1:1", now=at("2026-11-30T21:01:05Z"))
    fail_attempt(run.pk, reason="lease_expired", now=at("2026-11-30T21:03:00Z"))
    start_run(claim_next_run(worker="host-b:2:1", now=at("2026-11-30T21:03:10Z"), lease_seconds=60),
              worker="host-b:2:1", now=at("2026-11-30T21:03:12Z"))
    stdout = Path(tmp_path) / str(run.pk) / "stdout.log"
    stdout.parent.mkdir(parents=True)
    stdout.write_text("a" * 65536 + "THE-TAIL")
    finish_run(Run.objects.get(pk=run.pk), RunResult(
        outcome="REAPED", succeeded=True, summary="reaped 1", data={"reaped": ["T-7"]}, exit_code=0,
        stdout_path=str(stdout),
    ), worker="host-b:2:1", now=at("2026-11-30T21:04:17Z"))
    return Run.objects.get(pk=run.pk)


def test_a_run_page_reads_to_the_second_with_attempts_output_pages_and_links(client, approver, finished_run):
    client.force_login(approver)
    page = reverse("admin:runtime_run_change", args=[finished_run.pk])
    body = client.get(page).content.decode()
    assert "2026-11-30 21:03:12 UTC" in body and "2026-11-30 21:04:17 UTC" in body and "1 m 05 s" in body
    assert "host-a:1:1" in body and "host-b:2:1" in body and "lease_expired" in body
    # Page 1 of the output stops before its end, which the live panel's tail shows.
    assert "page 1 of 2" in body and body.count("THE-TAIL") == 1
    assert "aaaTHE-TAIL</pre>" in body[body.index('id="run-tail"'):]
    assert body.index("Captured output") < body.index('class="fieldset-heading">Times</h2>') < body.index("Attempts")
    assert reverse("admin:runtime_event_change", args=[finished_run.event_id]) in body
    assert reverse("admin:runtime_proposal_change", args=[finished_run.proposal_id]) in body
    assert "THE-TAIL" in client.get(page + "?output_page=2").content.decode()
    assert client.get(page + "?output_page=nope").status_code == 200


def test_a_proposal_page_links_its_run_and_every_page_calls_its_history_the_journal(client, approver, finished_run):
    client.force_login(approver)
    proposal = client.get(reverse("admin:runtime_proposal_change", args=[finished_run.proposal_id])).content.decode()
    run_url = reverse("admin:runtime_run_change", args=[finished_run.pk])
    assert f"<a href='{run_url}' id='run-link'>run {finished_run.pk}</a> (succeeded)" in proposal
    for page in (run_url, reverse("admin:runtime_event_change", args=[finished_run.event_id])):
        body = client.get(page).content.decode()
        assert 'class="historylink">Journal</a>' in body and ">History</a>" not in body


def test_a_run_page_lists_the_events_its_chain_admitted(client, approver, fake_agents, registry_files):
    registry_files.write_config("fake-outcomes.yaml", PR_OPEN_ONLY)
    inject("op-1", "factory.dispatch.requested", {"repo": "alpha", "ticket": "DEMO-1", "evidence": {}})
    step("2026-11-30T10:00:00Z")
    approve_proposal(Proposal.objects.get(status="pending").pk, user=approver, now=at("2026-11-30T10:00:30Z"))
    step("2026-11-30T10:01:00Z")                    # the run ends and its two chained events are admitted
    run = Run.objects.get(definition="dispatch@1")
    client.force_login(approver)
    body = client.get(reverse("admin:runtime_run_change", args=[run.pk])).content.decode()
    caused = Event.objects.filter(uid__in=[f"chain:{run.pk}:0", f"chain:{run.pk}:1"])
    assert caused.count() == 2
    assert all(reverse("admin:runtime_event_change", args=[event.pk]) in body for event in caused)
    assert [f"{event.uid}</a> {event.type}" in body for event in caused] == [True, True]


def test_a_run_page_says_none_for_no_result_data_and_its_durations_to_the_tenth(client, approver, finished_run):
    client.force_login(approver)
    Run.objects.filter(pk=finished_run.pk).update(result_data=None, finished_at=at("2026-11-30T21:03:12.44Z"))
    body = client.get(reverse("admin:runtime_run_change", args=[finished_run.pk])).content.decode()
    result = body[body.index("Result data (validated"):]
    assert result[result.index('<div class="readonly">'):].startswith('<div class="readonly">none</div>')
    assert "<tr><th scope='row'>took (started → finished)</th><td>0.4 s</td></tr>" in body


def test_the_actor_reads_operator_then_the_person_and_the_journal_shows_via_and_note(client, approver, finished_run):
    client.force_login(approver)
    run_page = client.get(reverse("admin:runtime_run_change", args=[finished_run.pk])).content.decode()
    assert '<div class="readonly">operator (alice)</div>' in run_page
    proposal_page = client.get(reverse("admin:runtime_proposal_change", args=[finished_run.proposal_id])).content.decode()
    assert '<div class="readonly">operator (alice)</div>' in proposal_page
    journal = client.get("/admin/runtime/journalentry/").content.decode()
    assert '<td class="field-actor_view">operator (alice)</td><td class="field-decision">via admin</td>' in journal
    assert decision_words({"via": "cli", "note": "checked the diff", "osUser": "al"}) == "via cli · note: checked the diff"
    assert decision_words({"reason": "rejected"}) == "—"


@pytest.mark.parametrize("object_id", ["abc", "1%00", "1.5", "-1"])
def test_a_proposal_page_of_no_number_is_the_admins_not_found_redirect_not_a_500(client, approver, object_id):
    client.force_login(approver)
    answer = client.get(f"/admin/runtime/proposal/{object_id}/change/")
    assert (answer.status_code, answer["Location"]) == (302, "/admin/")
