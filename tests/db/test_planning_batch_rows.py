"""What a planned chunk builds besides its outcomes (docs/design.md §7): the runs' lanes, the
previews of its watched proposals only, the keys held before it read from the database, and a
watched proposal of a singleton loop holding the loop for no later event of the chunk."""

import logging

import pytest

from runtime.models import Event, JournalEntry, Proposal, Run
from runtime.preview_model import Preview
from runtime.registry import get_registry
from runtime.services import planning_batch
from schedules.ticks import emit_due_ticks
from tests.conftest import SHA, at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T22:00:20Z")
WATCHED_REAPER = "schedules:\n  reaper:\n    enabled: true\n"
MERGE = {"repo": "alpha", "prNumbers": [7], "headSha": SHA}


def outcomes() -> list[tuple[str, str, str]]:
    return list(Event.objects.order_by("id").values_list("uid", "planning_outcome", "planning_reason"))


def test_a_chunks_runs_queue_in_their_loops_lane_or_their_doors_and_its_entries_name_them(registry_files):
    """A tick's run queues in its loop's lane, an injected event's in the ``inject`` door's; each
    proposal's entry names its proposal, each ``run_queued`` its proposal and run."""
    emit_due_ticks(now=at("2026-11-30T21:05:10Z"), registry=get_registry())
    inject("merge-1", "factory.merge.requested", MERGE)
    assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 2
    assert list(Run.objects.order_by("id").values_list("event__uid", "lane", "actor")) == [
        ("clock:heartbeat:2026-11-30T21:05:00Z", "loop:heartbeat", "schedule"),
        ("merge-1", "door:inject", "inject"),
    ]
    proposal = dict(Proposal.objects.values_list("event__uid", "id"))
    run = dict(Run.objects.values_list("event__uid", "id"))
    tick_uid = "clock:heartbeat:2026-11-30T21:05:00Z"
    assert list(JournalEntry.objects.exclude(action="event_admitted").order_by("id").values_list(
        "event__uid", "action", "proposal_id", "run_id")) == [
        (tick_uid, "proposal_auto_approved", proposal[tick_uid], None),
        (tick_uid, "run_queued", proposal[tick_uid], run[tick_uid]),
        ("merge-1", "proposal_auto_approved", proposal["merge-1"], None),
        ("merge-1", "run_queued", proposal["merge-1"], run["merge-1"]),
    ]


def test_a_chunk_queues_a_preview_for_its_watched_proposals_only(registry_files, monkeypatch):
    """The watched reaper proposal gets a preview, asked for at the chunk's instant, in the
    chunk's own write (no event planned again alone); the heartbeat's, approved at once, gets none."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    emit_due_ticks(now=at("2026-11-30T22:00:10Z"), registry=get_registry())
    alone = []
    monkeypatch.setattr(planning_batch, "plan_event", lambda *args, **kwargs: alone.append(args))
    assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 2
    assert alone == []
    reaper = Proposal.objects.get(definition="reaper@1")
    assert (reaper.status, Proposal.objects.get(definition="heartbeat@1").status) == ("pending", "approved")
    assert list(Preview.objects.values_list("proposal_id", "status", "requested_at")) == [(reaper.pk, "pending", NOW)]


def test_a_key_held_before_the_chunk_is_read_from_the_database(registry_files, monkeypatch, caplog):
    """A merge request whose key an earlier chunk's proposal holds is a NOOP decided in the chunk:
    nothing refused by the database, no event planned again alone."""
    inject("merge-1", "factory.merge.requested", MERGE)
    assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 1
    inject("merge-2", "factory.merge.requested", MERGE)
    alone = []
    monkeypatch.setattr(planning_batch, "plan_event", lambda *args, **kwargs: alone.append(args))
    with caplog.at_level(logging.INFO, logger="runtime.services.planning_batch"):
        assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 1
    assert alone == []
    assert [r.action for r in caplog.records if r.name == "runtime.services.planning_batch"] == []
    assert outcomes() == [("merge-1", "APPROVED", ""), ("merge-2", "NOOP", "duplicate_idempotency_key")]
    assert list(JournalEntry.objects.filter(event__uid="merge-2").exclude(action="event_admitted").values_list(
        "action", "data")) == [("event_noop", {"reason": "duplicate_idempotency_key", "idempotencyKey": f"merge-scan:alpha:7:{SHA}"})]


def test_a_watched_singleton_proposal_leaves_its_loop_free_for_the_next_tick(registry_files):
    """Two reaper ticks in one chunk, the reaper watched: no run is queued, so the second is
    proposed too, as planning them one at a time would."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER + "  heartbeat:\n    enabled: false\n")
    registry = get_registry()
    emit_due_ticks(now=at("2026-11-30T21:00:10Z"), registry=registry)
    emit_due_ticks(now=at("2026-11-30T22:00:10Z"), registry=registry)
    assert planning_batch.plan_batch(now=NOW, registry=registry) == 2
    assert outcomes() == [
        ("clock:reaper:2026-11-30T21:00:00Z", "PROPOSED", ""),
        ("clock:reaper:2026-11-30T22:00:00Z", "PROPOSED", ""),
    ]
    assert Run.objects.count() == 0
