"""The loop closing on itself: one injected event to a merged PR through chains (docs/demo.md; docs/design.md §8).

The tests drive the same chain the demo walks, with the fake adapter and no demo:
admission, the slot loop (publication and planning), the worker, two approvals.
"""

import json

import pytest
import time_machine
from django.core.management import call_command

from runtime.models import Event, JournalEntry, OutboxEntry, Proposal, Run
from runtime.services.approval import approve_proposal
from tests.conftest import OUTCOMES, SHA, at
from tests.helpers import inject, step

pytestmark = pytest.mark.django_db


def envelope_of(event_id: str) -> dict:
    return Event.objects.get(uid=event_id).envelope()


def test_one_injected_event_closes_the_loop_to_a_merged_pr_with_two_approvals(fake_agents, approver):
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")                                  # plan: work-scan, auto (inject door)
    work_scan = Run.objects.get(event__uid="op-1")
    assert (work_scan.actor, work_scan.approved_by, work_scan.plan["adapter"]) == ("inject", None, "fake")

    step("2026-11-30T10:01:00Z")                                  # work-scan DISPATCH → dispatch proposal
    work_scan.refresh_from_db()
    assert (work_scan.status, work_scan.outcome) == ("succeeded", "DISPATCH")
    dispatch_id = f"chain:{work_scan.pk}:0"
    assert envelope_of(dispatch_id) == {
        "schemaVersion": "factory.event/v1", "eventId": dispatch_id, "type": "factory.dispatch.requested",
        "source": "chain", "subject": "alpha", "occurredAt": "2026-11-30T10:01:00Z",
        "correlationId": "op-1", "causationId": "op-1",
        "payload": {"repo": "alpha", "ticket": "DEMO-1", "evidence": {"ticket": "DEMO-1", "ownedPaths": ["src/greeting.py"]}},
    }
    dispatch_proposal = Proposal.objects.get(event__uid=dispatch_id)
    assert (dispatch_proposal.status, dispatch_proposal.actor) == ("pending", "")
    assert dispatch_proposal.plan["input"]["evidence"]["ownedPaths"] == ["src/greeting.py"]
    assert Run.objects.count() == 1                               # nothing runs before a person says so

    with time_machine.travel(at("2026-11-30T10:02:00Z"), tick=False):
        dispatch = approve_proposal(dispatch_proposal.pk, user=approver, now=at("2026-11-30T10:02:00Z"))
    step("2026-11-30T10:03:00Z")                                  # dispatch PR_OPEN → work again + scoped merge
    dispatch.refresh_from_db()
    assert (dispatch.status, dispatch.outcome, dispatch.actor, dispatch.approved_by) == (
        "succeeded", "PR_OPEN", "operator", approver
    )
    work_again, merge_request = f"chain:{dispatch.pk}:0", f"chain:{dispatch.pk}:1"
    common = {"schemaVersion": "factory.event/v1", "source": "chain", "subject": "alpha",
              "occurredAt": "2026-11-30T10:03:00Z", "correlationId": "op-1", "causationId": dispatch_id}
    assert envelope_of(work_again) == {
        **common, "eventId": work_again, "type": "factory.work.requested", "payload": {"repo": "alpha"},
    }
    assert envelope_of(merge_request) == {
        **common, "eventId": merge_request, "type": "factory.merge.requested", "payload": {"repo": "alpha", "prNumbers": [7], "headSha": SHA},
    }

    step("2026-11-30T10:04:00Z")                                  # work-scan NO_WORK; merge-scan MERGE
    second_scan = Run.objects.get(event__uid=work_again)
    merge_scan = Run.objects.get(event__uid=merge_request)
    assert [(r.actor, r.approved_by, r.status, r.outcome) for r in (second_scan, merge_scan)] == [
        ("chain", None, "succeeded", "NO_WORK"), ("chain", None, "succeeded", "MERGE"),
    ]
    assert not OutboxEntry.objects.filter(run=second_scan).exists()
    apply_id = f"chain:{merge_scan.pk}:0"
    assert envelope_of(apply_id) == {
        **common, "eventId": apply_id, "type": "factory.merge-apply.requested", "occurredAt": "2026-11-30T10:04:00Z",
        "causationId": merge_request,
        "payload": {"repo": "alpha", "prNumber": 7, "headSha": SHA, "evidence": {"prNumber": 7, "headSha": SHA, "checks": "green"}},
    }
    apply_proposal = Proposal.objects.get(event__uid=apply_id)
    assert (apply_proposal.status, apply_proposal.plan["input"]["headSha"]) == ("pending", SHA)

    with time_machine.travel(at("2026-11-30T10:05:00Z"), tick=False):
        merge_apply = approve_proposal(apply_proposal.pk, user=approver, now=at("2026-11-30T10:05:00Z"))
    step("2026-11-30T10:06:00Z")
    merge_apply.refresh_from_db()
    assert (merge_apply.status, merge_apply.outcome, merge_apply.actor, merge_apply.approved_by) == (
        "succeeded", "MERGED", "operator", approver
    )

    # The whole story: six events of one correlation, two operator decisions, nothing pending.
    assert list(Event.objects.filter(correlation_id="op-1").order_by("id").values_list("uid", "type")) == [
        ("op-1", "factory.work.requested"), (dispatch_id, "factory.dispatch.requested"),
        (work_again, "factory.work.requested"), (merge_request, "factory.merge.requested"),
        (apply_id, "factory.merge-apply.requested"),
    ]
    decisions = JournalEntry.objects.filter(action__in=["proposal_approved", "proposal_auto_approved"]).order_by("id")
    assert [(e.action, e.actor, e.actor_name, e.event.uid) for e in decisions] == [
        ("proposal_auto_approved", "inject", "", "op-1"),
        ("proposal_approved", "operator", "alice", dispatch_id),
        ("proposal_auto_approved", "chain", "", work_again),
        ("proposal_auto_approved", "chain", "", merge_request),
        ("proposal_approved", "operator", "alice", apply_id),
    ]
    assert not Proposal.objects.filter(status="pending").exists()
    assert set(OutboxEntry.objects.values_list("status", flat=True)) == {"published"}


def test_journal_correlation_tells_one_chain_in_order(fake_agents, approver, capsys):
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    inject("op-2", "factory.work.requested", {"repo": "beta"})    # another story, not in op-1's
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    call_command("journal", "--correlation", "op-1", "--json")
    story = json.loads(capsys.readouterr().out)
    assert [e["id"] for e in story] == sorted(e["id"] for e in story)
    assert {e["eventId"] for e in story} == {"op-1", f"chain:{Run.objects.get(event__uid='op-1').pk}:0"}
    assert [(e["action"], e["actor"]) for e in story] == [
        ("event_admitted", "inject"),
        ("proposal_auto_approved", "inject"),
        ("run_queued", "inject"),
        ("run_claimed", "system"),
        ("run_started", "system"),
        ("run_succeeded", "system"),
        ("chain_queued", "chain"),
        ("event_admitted", "chain"),
        ("proposal_created", "system"),
    ]


@pytest.mark.parametrize("outcome", ["FAILED", "BLOCKED"])
def test_a_failed_or_blocked_dispatch_terminates_the_chain(fake_agents, approver, outcome):
    fake_agents.write_config("fake-outcomes.yaml", OUTCOMES.replace("outcome: PR_OPEN", f"outcome: {outcome}"))
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    approve_proposal(Proposal.objects.get(status="pending").pk, user=approver, now=at("2026-11-30T10:02:00Z"))
    step("2026-11-30T10:03:00Z")
    step("2026-11-30T10:04:00Z")
    dispatch = Run.objects.get(definition="dispatch@1")
    assert (dispatch.status, dispatch.outcome) == ("succeeded", outcome)
    assert not OutboxEntry.objects.filter(run=dispatch).exists()
    assert Event.objects.count() == 2 and Run.objects.count() == 2


def test_not_claimed_refires_only_work(fake_agents, approver):
    fake_agents.write_config("fake-outcomes.yaml", OUTCOMES.replace("outcome: PR_OPEN", "outcome: NOT_CLAIMED"))
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    approve_proposal(Proposal.objects.get(status="pending").pk, user=approver, now=at("2026-11-30T10:02:00Z"))
    step("2026-11-30T10:03:00Z")
    dispatch = Run.objects.get(definition="dispatch@1")
    assert [(e.event_uid, e.envelope["type"], e.envelope["payload"]) for e in OutboxEntry.objects.filter(run=dispatch)] == [
        (f"chain:{dispatch.pk}:0", "factory.work.requested", {"repo": "alpha"}),
    ]


def test_low_supply_asks_for_triage_as_a_watched_proposal(fake_agents):
    fake_agents.write_config("fake-outcomes.yaml", "outcomes:\n  work-scan@1:\n    - results: [{outcome: LOW_SUPPLY}]\n")
    inject("op-1", "factory.work.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    triage = Proposal.objects.get(definition="triage@1")
    assert (triage.status, triage.event.type, triage.event.payload, triage.event.causation_id) == (
        "pending", "factory.triage.requested", {"repo": "alpha"}, "op-1"
    )
