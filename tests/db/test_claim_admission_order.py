"""``runtime.services.planning_claim``: a chunk leaves out each event with an older unplanned
event of its correlation, or of its loop and key, that another planner holds, and every
later event of that correlation or loop; the rest it keeps, in admission order, with their
fields as stored (docs/design.md §7).

On SQLite one planner takes the oldest events, so nothing older is ever held: the chunk here
is the backlog less the events "another planner holds", handed to ``_in_admission_order`` as
``claim_chunk`` would after its read."""

from datetime import UTC, datetime

import pytest

from runtime.models import Door, Event
from runtime.services.planning_claim import ClaimedEvent, _in_admission_order, _older_unplanned, claim_chunk
from tests.conftest import at

pytestmark = pytest.mark.django_db(transaction=False)

NOW = at("2026-11-30T22:00:00Z")

#: The backlog in admission order: (eventId, correlation, loop and key of a tick or None,
#: held by another planner).
BACKLOG = [
    ("e01", "A", None, True),
    ("e02", "B", None, False),            # kept
    ("e03", "A", None, False),            # waits: e01 (A) is held
    ("e04", "A", None, True),
    ("e05", "C", ("L", None), True),
    ("e06", "D", ("L", None), False),     # waits: e05 holds loop L
    ("e07", "E", ("L", "k1"), False),     # kept: loop L's key k1 is another loop
    ("e08", "F", None, False),            # kept
    ("e09", "D", None, False),            # waits: D waits since e06
    ("e10", "G", ("L", None), True),
    ("e11", "A", ("M", None), False),     # waits: A is held
    ("e12", "H", ("M", None), False),     # waits: loop M waits since e11
    ("e13", "B", None, False),            # kept
    ("e14", "I", ("N", "k2"), False),     # kept
]


def _admit(uid: str, correlation: str, loop: tuple | None) -> Event:
    tick = loop is not None
    return Event.objects.create(
        uid=uid, type="factory.triage.requested", source="operator", subject="factory", occurred_at=NOW,
        correlation_id=correlation, payload={"repo": "factory", "n": uid}, admitted_at=NOW,
        door=Door.SCHEDULE if tick else Door.INJECT,
        loop=loop[0] if tick else None, loop_key=loop[1] if tick else None,
        slot=datetime(2026, 11, 30, 21, 0, tzinfo=UTC) if tick else None,
    )


def _chunk() -> list[ClaimedEvent]:
    for uid, correlation, loop, _ in BACKLOG:
        _admit(uid, correlation, loop)
    held = {uid for uid, _, _, is_held in BACKLOG if is_held}
    return [event for event in claim_chunk(100) if event.uid not in held]


def test_the_backlog_unheld_is_one_chunk_in_admission_order():
    """Nobody holds an older event: the chunk is every unplanned event, oldest first."""
    for uid, correlation, loop, _ in BACKLOG:
        _admit(uid, correlation, loop)
    assert [event.uid for event in claim_chunk(100)] == [uid for uid, *_ in BACKLOG]
    assert [event.uid for event in claim_chunk(3)] == ["e01", "e02", "e03"]


def test_events_behind_a_held_correlation_or_loop_wait():
    """Exactly the events with nothing older held of their correlation or loop (and key) are kept."""
    chunk = _chunk()
    assert [event.uid for event in _in_admission_order(chunk)] == ["e02", "e07", "e08", "e13", "e14"]


def test_the_older_unplanned_events_outside_the_chunk_are_the_held_ones():
    """``_older_unplanned`` names each held event older than the chunk's last: id, correlation,
    door, loop, key."""
    chunk = _chunk()
    ids = {event.uid: event.pk for event in Event.objects.all()}
    assert sorted(_older_unplanned(chunk)) == [
        (ids["e01"], "A", "inject", None, None),
        (ids["e04"], "A", "inject", None, None),
        (ids["e05"], "C", "schedule", "L", None),
        (ids["e10"], "G", "schedule", "L", None),
    ]
    # Older than the chunk's last (e06), not only than the one before it (e03).
    assert sorted(_older_unplanned(chunk[:3])) == [
        (ids["e01"], "A", "inject", None, None),
        (ids["e04"], "A", "inject", None, None),
        (ids["e05"], "C", "schedule", "L", None),
    ]


def test_a_kept_event_is_the_stored_row():
    """A kept event reads as stored: its pk, tick-ness, loop, key, slot and payload."""
    kept = {event.uid: event for event in _in_admission_order(_chunk())}
    tick = kept["e07"]
    assert (tick.pk, tick.is_tick, tick.loop, tick.loop_key) == (Event.objects.get(uid="e07").pk, True, "L", "k1")
    assert tick.slot == datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
    assert kept["e02"].is_tick is False and kept["e02"].payload == {"repo": "factory", "n": "e02"}
    assert repr(kept["e02"]) == f"<ClaimedEvent {kept['e02'].pk} e02>"


def test_a_claimed_event_takes_exactly_the_planned_fields():
    """A row of more or fewer columns than ``PLANNED_FROM`` is refused, not read short."""
    assert ClaimedEvent(*range(9)).correlation_id == 8
    with pytest.raises(ValueError, match="zip"):
        ClaimedEvent(*range(8))
    with pytest.raises(ValueError, match="zip"):
        ClaimedEvent(*range(10))
