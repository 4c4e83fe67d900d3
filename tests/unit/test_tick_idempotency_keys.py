"""The idempotency key of a tick (docs/design.md §7.2): ``<loop>:<slot>``, and ``<loop>:<key>:<slot>``
for a keyed loop's tick, whose customers share a slot but not a key (no database: the events are
built, not stored)."""

from runtime.models import Door, Event
from runtime.registry import get_registry
from runtime.services.idempotency import idempotency_key
from tests.conftest import at


def tick(loop: str, key: str | None, slot: str) -> Event:
    payload = {"loop": loop, "slot": slot, **({"key": key} if key else {})}
    return Event(uid=f"clock:{loop}:{slot}", door=Door.SCHEDULE, loop=loop, loop_key=key, slot=at(slot), payload=payload)


def test_a_keyed_ticks_key_names_its_loop_its_key_and_its_slot():
    definition = get_registry().definitions["customer-digest@1"]
    keys = [idempotency_key(tick("customer-digest", key, "2026-11-30T09:00:00Z"), definition) for key in ("c-7", "c-8")]
    assert keys == ["customer-digest:c-7:2026-11-30T09:00:00Z", "customer-digest:c-8:2026-11-30T09:00:00Z"]


def test_a_plain_ticks_key_names_its_loop_and_its_slot():
    definition = get_registry().definitions["heartbeat@1"]
    assert idempotency_key(tick("heartbeat", None, "2026-11-30T10:00:00Z"), definition) == "heartbeat:2026-11-30T10:00:00Z"
