"""Ship-apply is structurally human-only: nothing but a person can approve it (docs/demo.md; docs/design.md §4, §7).

The registry's and the planner's side of the rule, without a database, are in ``unit/test_ship_apply_policy.py``.
"""

import pytest

from runtime.models import Door, Proposal, Run
from runtime.services.admission import admit_event
from runtime.services.approval import approve_proposal
from tests.conftest import at
from tests.helpers import SHIP_PAYLOAD, inject, step
from tests.helpers import SHIP_SHA as SHA

pytestmark = pytest.mark.django_db


def test_a_ship_scan_verdict_chains_a_pending_proposal_a_person_must_approve(fake_agents, approver):
    fake_agents.write_config("fake-outcomes.yaml", f"""
outcomes:
  ship-scan@1:
    - results: [{{outcome: SHIP, data: {{headSha: {SHA}}}}}]
  ship-apply@1:
    - results: [{{outcome: SHIPPED}}]
""")
    inject("op-1", "factory.ship.requested", {"repo": "alpha"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    scan = Run.objects.get(definition="ship-scan@1")
    proposal = Proposal.objects.get(definition="ship-apply@1")
    assert (proposal.event.uid, proposal.event.door, proposal.event.payload) == (
        f"chain:{scan.pk}:0", "chain", SHIP_PAYLOAD,
    )
    assert (proposal.status, proposal.actor, proposal.decided_by) == ("pending", "", None)
    step("2026-11-30T10:02:00Z")
    assert not Run.objects.filter(definition="ship-apply@1").exists()
    run = approve_proposal(proposal.pk, user=approver, now=at("2026-11-30T10:03:00Z"))
    assert (run.actor, run.approved_by) == ("operator", approver)


def test_a_ship_apply_request_from_outside_is_still_a_pending_proposal(fake_agents):
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": "gh-ship", "type": "factory.ship-apply.requested",
        "source": "github", "subject": "alpha", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": "gh-ship",
        "payload": SHIP_PAYLOAD,
    }, door=Door.GITHUB, now=at("2026-11-30T10:00:00Z"))
    step("2026-11-30T10:00:00Z")
    assert Proposal.objects.get(event__uid="gh-ship").status == "pending"
    assert not Run.objects.exists()
