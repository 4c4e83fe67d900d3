"""Ship-apply stays human-only in the registry and in the planner, whatever a door or a loop says (docs/demo.md; docs/design.md §4, §7)."""

import pytest

from runtime.models import Door, Event
from runtime.registry import RegistryInvalid, get_registry
from runtime.services.planning import approval_policy
from tests.helpers import SHIP_PAYLOAD


@pytest.mark.parametrize("door", [Door.CHAIN, Door.GITHUB, Door.EVENTS, Door.INJECT])
def test_no_door_auto_approves_ship_apply_even_when_the_type_says_auto_in_memory(door):
    registry = get_registry()
    ship_apply = registry.event_types["factory.ship-apply.requested"]
    assert ship_apply.human_approval_only
    event = Event(uid="e", type="factory.ship-apply.requested", door=door, payload=SHIP_PAYLOAD)
    assert approval_policy(event, registry) == "watched"
    forged = {**registry.event_types, ship_apply.name: type(ship_apply)(**{**vars(ship_apply), "approval": "auto"})}
    assert approval_policy(event, type(registry)(**{**vars(registry), "event_types": forged})) == "watched"


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
