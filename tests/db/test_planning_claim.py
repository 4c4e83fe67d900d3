"""``runtime.services.planning_claim``: a planner's chunk read with plain SQL holds exactly the
fields the model holds — a tick's slot as an aware UTC instant, the payload as its document —
oldest first, and nothing already planned (docs/design.md §7)."""

import re
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runtime.models import Event
from runtime.registry import get_registry
from runtime.services.planning import plan_pending
from runtime.services.planning_claim import PLANNED_FROM, claim_chunk
from schedules.ticks import emit_due_ticks
from tests.conftest import at
from tests.helpers import SHIP_PAYLOAD, inject

pytestmark = pytest.mark.django_db(transaction=False)


def test_a_chunk_holds_the_fields_the_model_holds(registry_files):
    emit_due_ticks(now=at("2026-11-30T22:00:20Z"), registry=get_registry())
    inject("ship-1", "factory.ship-apply.requested", SHIP_PAYLOAD, "2026-11-30T22:00:30Z")
    stored = list(Event.objects.filter(planned_at__isnull=True).order_by("id"))
    claimed = claim_chunk(100)
    assert [event.pk for event in claimed] == [event.pk for event in stored]
    for event, model in zip(claimed, stored, strict=True):
        assert {name: getattr(event, name) for name in PLANNED_FROM} == {name: getattr(model, name) for name in PLANNED_FROM}
        assert event.is_tick == model.is_tick
    ticks = [event for event in claimed if event.is_tick]
    assert [event.uid for event in ticks][:1] == ["clock:heartbeat:2026-11-30T22:00:00Z"]
    assert ticks[0].slot == datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
    assert ticks[0].slot.tzinfo is UTC
    assert claimed[-1].uid == "ship-1" and claimed[-1].slot is None and claimed[-1].payload == SHIP_PAYLOAD


def test_a_chunk_is_the_oldest_unplanned_events_up_to_its_size(registry_files):
    for n in range(3):
        inject(f"triage-{n}", "factory.triage.requested", {"repo": "factory"}, "2026-11-30T22:00:30Z")
    assert [event.uid for event in claim_chunk(2)] == ["triage-0", "triage-1"]
    plan_pending(now=at("2026-11-30T22:00:40Z"), registry=get_registry())
    assert claim_chunk(2) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's scan choice")
@pytest.mark.django_db(transaction=True)  # the setting ends with a real transaction, not a savepoint
def test_a_chunk_turns_bitmap_scans_and_the_commits_wait_for_the_flush_off_for_its_transaction_only(registry_files):
    """The chunk's commit does not wait for the WAL's flush (docs/design.md §7, "Batches");
    the connection's next transaction, a door's or an approval's, does again."""
    inject("triage-0", "factory.triage.requested", {"repo": "factory"}, "2026-11-30T22:00:30Z")
    show = "SELECT current_setting('enable_bitmapscan'), current_setting('synchronous_commit')"
    with connection.cursor() as cursor:
        with transaction.atomic():
            assert [event.uid for event in claim_chunk(500)] == ["triage-0"]
            cursor.execute(show)
            assert cursor.fetchone() == ("off", "off")
        cursor.execute(show)
        assert cursor.fetchone() == ("on", "on")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plan")
def test_the_chunks_outcomes_look_up_its_events_by_id_without_a_join(registry_files):
    """The outcomes' update finds the chunk's events by id and each one's outcome by its id in
    one JSON object: no join the planner could turn into a nested loop comparing every pair
    (50 of a chunk's 60 ms at 60,000 events, docs/performance.md)."""
    for n in range(3):
        inject(f"triage-{n}", "factory.triage.requested", {"repo": "factory"}, "2026-11-30T22:00:30Z")
    with CaptureQueriesContext(connection) as queries:
        assert plan_pending(now=at("2026-11-30T22:00:40Z"), registry=get_registry()) == 3
    update = next(q["sql"] for q in queries if q["sql"].startswith('UPDATE "runtime_event"'))
    ids = ",".join(str(pk) for pk in Event.objects.order_by("id").values_list("id", flat=True))
    assert re.search(rf'WHERE "runtime_event"\."id" = ANY\(\'\{{{ids}\}}\'::int\d\[\]\) '
                     rf'AND "runtime_event"\."planned_at" IS NULL$', update), update
    assert list(Event.objects.order_by("id").values_list("planning_outcome", "planning_reason")) == [
        ("PROPOSED", ""), ("PROPOSED", ""), ("PROPOSED", "")]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + update)
        plan = cursor.fetchone()[0][0]["Plan"]
    nodes, found = [plan], []
    while nodes:
        node = nodes.pop()
        found.append(node["Node Type"])
        nodes += node.get("Plans", [])
    assert found[0] == "ModifyTable" and "Nested Loop" not in found and "Hash Join" not in found, found
