"""The fair run queue (docs/design.md §8): claims go round-robin across loops and doors, oldest
first within each, so no loop or door starves the others."""

from datetime import timedelta

import pytest
from django.db import connection

from runtime.models import Door, QueueLane, Run
from runtime.services.admission import admit_event
from runtime.services.planning import plan_pending
from runtime.services.queue import claimable_query, next_claimable
from runtime.services.runs import claim_next_run
from tests.conftest import at
from tests.helpers import inject, tick

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:00:30Z")


def through_events_door(event_id: str) -> None:
    admit_event({
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": "factory.merge.requested",
        "source": "bridge", "subject": "alpha", "occurredAt": "2026-11-30T21:00:00Z", "correlationId": event_id,
        "payload": {"repo": "alpha"},
    }, door=Door.EVENTS, now=NOW)


def claims(count: int) -> list[str]:
    """The events of the next ``count`` claims, in claim order (each at the same instant)."""
    order = []
    for n in range(count):
        run = claim_next_run(worker=f"w{n}", now=NOW, lease_seconds=60)
        order.append(run.event.uid if run else None)
    return order


def test_claims_go_round_robin_across_doors_and_loops_oldest_first_within_each(registry_files):
    for n in (1, 2, 3):
        inject(f"inject-{n}", "factory.merge.requested", {"repo": "alpha"})
    through_events_door("events-1")
    through_events_door("events-2")
    plan_pending(now=NOW)
    tick("2026-11-30T21:00:10Z")
    assert list(Run.objects.order_by("id").values_list("event__uid", "lane")) == [
        ("inject-1", "door:inject"), ("inject-2", "door:inject"), ("inject-3", "door:inject"),
        ("events-1", "door:events"), ("events-2", "door:events"),
        ("clock:heartbeat:2026-11-30T21:00:00Z", "loop:heartbeat"),
    ]
    assert claims(7) == [
        "inject-1", "events-1", "clock:heartbeat:2026-11-30T21:00:00Z", "inject-2", "events-2", "inject-3", None,
    ]
    assert dict(QueueLane.objects.values_list("lane", "turn")) == {
        "door:inject": 6, "door:events": 5, "loop:heartbeat": 3,
    }


def test_a_heartbeat_run_behind_a_flood_of_webhook_runs_is_claimed_at_the_next_free_worker(registry_files):
    for n in range(60):
        inject(f"flood-{n:02d}", "factory.merge.requested", {"repo": "alpha"})
    plan_pending(now=NOW)
    assert claims(3) == ["flood-00", "flood-01", "flood-02"]
    tick("2026-11-30T21:00:10Z")
    assert Run.objects.filter(status="queued").count() == 58
    assert claims(2) == ["clock:heartbeat:2026-11-30T21:00:00Z", "flood-03"]


def test_a_lane_whose_next_run_waits_at_a_barrier_lets_the_other_lanes_go(registry_files):
    inject("inject-1", "factory.merge.requested", {"repo": "alpha"})
    plan_pending(now=NOW)
    tick("2026-11-30T21:00:10Z")
    Run.objects.filter(event__uid="inject-1").update(barrier="merge")
    held = Run.objects.get(event__uid="clock:heartbeat:2026-11-30T21:00:00Z")
    Run.objects.filter(pk=held.pk).update(barrier="merge", status="running", worker="w0",
                                          lease_expires_at=NOW + timedelta(seconds=60))
    assert next_claimable(lock=False) is None
    Run.objects.filter(pk=held.pk).update(status="succeeded", lease_expires_at=None)
    assert claims(1) == ["inject-1"]


def test_the_claim_uses_the_queued_runs_partial_index_on_sqlite(registry_files):
    if connection.vendor != "sqlite":
        pytest.skip("the partial-index rule is SQLite's")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + claimable_query(lock=False))
        plan = [row[-1] for row in cursor.fetchall()]
    assert plan[0] == "SCAN run USING INDEX run_queued_idx"


def test_a_locking_pick_ends_with_postgresqls_skip_locked_row_lock_and_a_plain_one_with_nothing():
    plain, locking = claimable_query(lock=False), claimable_query(lock=True)
    assert plain.endswith("ORDER BY COALESCE(lane.turn, 0), run.id LIMIT 1")
    assert locking == plain + " FOR UPDATE OF run SKIP LOCKED"


def test_next_claimable_asks_for_the_lock_it_is_told(monkeypatch):
    from runtime.services import queue

    asked = []
    monkeypatch.setattr(queue, "claimable_query", lambda *, lock: asked.append(lock) or "SELECT 7, 'door:github'")
    assert (next_claimable(lock=True), next_claimable(lock=False)) == ((7, "door:github"), (7, "door:github"))
    assert asked == [True, False]
