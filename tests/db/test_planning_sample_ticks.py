"""Planning does not validate again a tick its registry validated at load (docs/design.md §3, §7)."""

import pytest
from django.db import transaction

from lib.slots import DueSlot
from runtime.models import Door, Event
from runtime.registry import get_registry
from runtime.services.admission import admit_batch
from runtime.services.planning import decide
from schedules.envelope import tick_envelope
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = "2026-11-30T21:10:00.300Z"


def test_a_tick_shaped_as_its_loops_sample_is_planned_without_validating_it_again(monkeypatch):
    """The registry validated the heartbeat's sample tick against its input schema at load
    (docs/design.md §3, §7); a tick that differs only in slot and skipped count is not
    validated again, one with anything else is."""
    from runtime.services import planning

    registry = get_registry()
    loop = registry.loops["heartbeat"]
    sample_shaped = tick_envelope(loop, DueSlot(at("2026-11-30T21:05:00Z"), 3))
    stray = tick_envelope(loop, DueSlot(at("2026-11-30T21:10:00Z"), 0))
    stray["payload"] = {**stray["payload"], "stray": 1}
    now = at(NOW)
    with transaction.atomic():
        admit_batch([sample_shaped, stray], door=Door.SCHEDULE, now=now, registry=registry, validate=False)
    events = {e.uid: e for e in Event.objects.all()}
    checked = []
    real = planning.validator_for
    monkeypatch.setattr(planning, "validator_for", lambda schema: checked.append(schema) or real(schema))
    decisions = [
        decide(events[e["eventId"]], registry, held=lambda key: False, in_flight=lambda single: False)
        for e in (sample_shaped, stray)
    ]
    assert [(d.outcome, d.reason) for d in decisions] == [("APPROVED", ""), ("REFUSED", "input_schema_violation")]
    assert len(checked) == 1  # the stray one only
    assert planning.is_sample_shaped_tick(events[sample_shaped["eventId"]], loop)
    assert not planning.is_sample_shaped_tick(events[stray["eventId"]], loop)
