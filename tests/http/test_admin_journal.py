"""The journal in the admin, filtered by correlation: one chain's story, oldest first (docs/design.md §9, §10)."""

import pytest

from runtime.models import Actor, Event, JournalEntry
from runtime.services.journal import record
from tests.conftest import at
from tests.helpers import inject, step

pytestmark = pytest.mark.django_db


def test_the_admin_journal_filtered_by_correlation_shows_one_story_oldest_first(fake_agents, approver, client):
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    inject("op-2", "factory.work.requested", {"repo": "beta"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    client.force_login(approver)
    page = client.get("/admin/runtime/journalentry/", {"event__correlation_id": "op-1"})
    assert page.status_code == 200
    shown = [entry.pk for entry in page.context["cl"].result_list]
    assert shown == list(JournalEntry.objects.filter(event__correlation_id="op-1").order_by("id").values_list("id", flat=True))
    event_page = client.get(f"/admin/runtime/event/{Event.objects.get(uid='op-1').pk}/change/")
    assert "?event__correlation_id=op-1" in event_page.content.decode()


def test_a_story_has_a_heading_and_indents_each_event_under_its_cause(fake_agents, approver, client):
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    client.force_login(approver)
    page = client.get("/admin/runtime/journalentry/", {"event__correlation_id": "op-1"})
    body = page.content.decode()
    assert "<h1>The story of op-1: every event it caused, who decided and what ran, oldest first</h1>" in body
    events = {uid: causation for uid, causation in Event.objects.filter(correlation_id="op-1").values_list("uid", "causation_id")}
    caused = [uid for uid, causation in events.items() if causation == "op-1"]
    assert caused, events
    assert "<span class='story-depth-0' style='padding-left: 0.0em'>op-1</span>" in body
    assert f"<span class='story-depth-1' style='padding-left: 1.5em'>↳ {caused[0]}</span>" in body


def test_the_list_shows_a_long_note_cut_and_a_proposal_or_run_as_its_id_and_status(fake_agents, approver, client):
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    proposal = Event.objects.get(uid="op-1").proposal
    record("proposal_rejected", Actor.OPERATOR, at=at("2026-11-30T10:00:30Z"), actor_name="alice", proposal=proposal,
           event=proposal.event, data={"via": "cli", "note": "y" * 2000})
    client.force_login(approver)
    body = client.get("/admin/runtime/journalentry/", {"action__exact": "proposal_rejected"}).content.decode()
    assert f'<td class="field-decision">via cli · note: {"y" * 103}…</td>' in body
    assert (f'<td class="field-proposal_short"><a href=\'/admin/runtime/proposal/{proposal.pk}/change/\'>{proposal.pk}</a> '
            f'{proposal.status}</td>') in body
    entry = JournalEntry.objects.get(action="proposal_rejected")
    assert "y" * 2000 in client.get(f"/admin/runtime/journalentry/{entry.pk}/change/").content.decode()
