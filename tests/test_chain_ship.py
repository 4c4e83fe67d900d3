"""Ship-apply is structurally human-only: nothing but a person can approve it (spec §12, §14; DESIGN §4, §7)."""

import pytest

from runtime.services.admission import admit_event
from runtime.services.approval import approve_proposal
from runtime.models import Door, Event, Proposal, Run
from runtime.services.planning import approval_policy
from runtime.registry import RegistryInvalid, get_registry

from .conftest import at
from .helpers import inject, step

pytestmark = pytest.mark.django_db

SHA = "0123456789abcdef0123456789abcdef01234567"
SHIP_PAYLOAD = {"repo": "alpha", "headSha": SHA, "evidence": {"headSha": SHA}}


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


@pytest.mark.parametrize("door", [Door.CHAIN, Door.GITHUB, Door.EVENTS, Door.INJECT])
def test_no_door_auto_approves_ship_apply_even_when_the_type_says_auto_in_memory(door):
    registry = get_registry()
    ship_apply = registry.event_types["factory.ship-apply.requested"]
    assert ship_apply.human_approval_only
    event = Event(uid="e", type="factory.ship-apply.requested", door=door, payload=SHIP_PAYLOAD)
    assert approval_policy(event, registry) == "watched"
    forged = {**registry.event_types, ship_apply.name: type(ship_apply)(**{**vars(ship_apply), "approval": "auto"})}
    assert approval_policy(event, type(registry)(**{**vars(registry), "event_types": forged})) == "watched"


def test_a_ship_apply_request_from_outside_is_still_a_pending_proposal(fake_agents):
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": "gh-ship", "type": "factory.ship-apply.requested",
        "source": "github", "subject": "alpha", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": "gh-ship",
        "payload": SHIP_PAYLOAD,
    }, door=Door.GITHUB, now=at("2026-11-30T10:00:00Z"))
    step("2026-11-30T10:00:00Z")
    assert Proposal.objects.get(event__uid="gh-ship").status == "pending"
    assert not Run.objects.exists()


def test_the_registry_refuses_auto_on_ship_apply(registry_files):
    registry_files.update("event-types.json", lambda t: t["factory.ship-apply.requested"].update(approval="auto"))
    with pytest.raises(RegistryInvalid) as refused:
        get_registry()
    assert {e.rule for e in refused.value.errors} >= {"auto_on_human_only", "auto_on_mutating_target"}


def test_no_loop_may_auto_approve_ship_apply(registry_files):
    registry_files.update("schedules.json", lambda s: s.update({"ship-now": {
        "every": "7d", "eventType": "factory.ship-apply.requested", "approval": "auto", "enabled": True,
        "payload": SHIP_PAYLOAD,
    }}))
    with pytest.raises(RegistryInvalid) as refused:
        get_registry()
    assert "auto_on_human_only" in {e.rule for e in refused.value.errors if e.entry == "ship-now"}
