"""Batched planning's fallbacks (docs/design.md §7): an empty backlog, a chunk the database
refuses (planned again one event at a time) and a chunk planned meanwhile (rolled back), each
with what it logs."""

import logging

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from runtime.models import Event, JournalEntry, Proposal
from runtime.registry import get_registry
from runtime.services import planning_batch
from runtime.services.planning_claim import CHUNK_SETTINGS
from tests.conftest import at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T22:00:20Z")


def triage_backlog(count: int) -> list[int]:
    for n in range(count):
        inject(f"triage-{n}", "factory.triage.requested", {"repo": "alpha"})
    return list(Event.objects.filter(planned_at__isnull=True).order_by("id").values_list("id", flat=True))


def test_an_empty_backlog_plans_nothing(registry_files):
    """No unplanned event: 0, nothing written."""
    assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 0
    assert (Proposal.objects.count(), JournalEntry.objects.count()) == (0, 0)


def test_a_chunk_the_database_refuses_is_planned_one_event_at_a_time(registry_files, monkeypatch, caplog):
    """An insert refused (a concurrent change): the chunk is rolled back, logged, and each of its
    events planned on its own with the registry the chunk was given; the count is of the events
    planned."""
    backlog = triage_backlog(3)
    real = planning_batch.insert_rows
    calls = []

    def refused_once(model, rows, *, key):
        calls.append(model.__name__)
        if len(calls) == 1:
            raise IntegrityError("a concurrent change")
        return real(model, rows, key=key)

    monkeypatch.setattr(planning_batch, "insert_rows", refused_once)
    registry = get_registry()
    one_at_a_time = planning_batch.plan_event
    registries = []

    def plan_event(event_id, *, now, registry):
        registries.append(registry)
        return one_at_a_time(event_id, now=now, registry=registry)

    monkeypatch.setattr(planning_batch, "plan_event", plan_event)
    with caplog.at_level(logging.INFO, logger="runtime.services.planning_batch"):
        assert planning_batch.plan_batch(now=NOW, registry=registry) == 3
    assert calls == ["Proposal"]
    assert registries == [registry] * 3
    assert [(r.levelname, r.getMessage(), r.action) for r in caplog.records
            if r.name == "runtime.services.planning_batch"] == [
        ("INFO", "a chunk of 3 events met a concurrent change; planning them one at a time", "planning_chunk_retried")]
    assert list(Event.objects.filter(pk__in=backlog).order_by("id").values_list("planning_outcome", "planned_at")) == [
        ("PROPOSED", NOW)] * 3
    assert Proposal.objects.count() == 3
    assert JournalEntry.objects.filter(action="proposal_created").count() == 3


def test_a_chunk_planned_meanwhile_is_logged_as_lost(registry_files, monkeypatch, caplog):
    """The compare-and-swap on ``planned_at`` missing a row: 0, nothing written, and a warning
    on PostgreSQL (a planner ignored the row locks); on SQLite, where a chunk is read before
    its transaction, another process's planner wrote it first: information."""
    backlog = triage_backlog(2)
    decide_chunk = planning_batch._decide_chunk

    def planned_meanwhile(events, registry):
        Event.objects.filter(pk=backlog[1]).update(planned_at=at("2026-11-30T22:00:19Z"), planning_outcome="NOOP")
        return decide_chunk(events, registry)

    monkeypatch.setattr(planning_batch, "_decide_chunk", planned_meanwhile)
    with caplog.at_level(logging.INFO, logger="runtime.services.planning_batch"):
        assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 0
    logged = {
        "postgresql": ("WARNING", "a chunk's events were planned meanwhile; it was rolled back"),
        "sqlite": ("INFO", "a chunk's events were planned meanwhile by another planner; it was rolled back"),
    }[connection.vendor]
    assert [(r.levelname, r.getMessage(), r.action) for r in caplog.records
            if r.name == "runtime.services.planning_batch"] == [(*logged, "planning_chunk_lost")]
    assert Proposal.objects.count() == 0
    # On SQLite the other planner's mark was committed; on PostgreSQL it was the chunk's.
    unplanned = backlog if connection.vendor == "postgresql" else backlog[:1]
    assert list(Event.objects.filter(planned_at__isnull=True).order_by("id").values_list("id", flat=True)) == unplanned


def test_a_chunk_plans_at_most_its_size_oldest_first(registry_files):
    """``size`` events a chunk, the oldest; the next chunk takes the rest."""
    backlog = triage_backlog(3)
    registry = get_registry()
    assert planning_batch.plan_batch(now=NOW, registry=registry, size=2) == 2
    assert list(Event.objects.filter(planned_at__isnull=True).values_list("id", flat=True)) == [backlog[2]]
    assert planning_batch.plan_batch(now=NOW, registry=registry, size=2) == 1
    assert planning_batch.plan_batch(now=NOW, registry=registry, size=2) == 0


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_a_chunk_is_read_and_decided_before_its_transaction(registry_files):
    """SQLite: every statement before the chunk's ``BEGIN`` only reads, and the write turn is
    taken for the inserts and the outcomes' update alone; on PostgreSQL the claim's row lock
    needs the transaction first."""
    triage_backlog(3)
    with CaptureQueriesContext(connection) as queries:
        assert planning_batch.plan_batch(now=NOW, registry=get_registry()) == 3
    verbs = [q["sql"].split()[0].upper() for q in queries]
    begin = verbs.index("BEGIN") if "BEGIN" in verbs else None
    if connection.vendor == "sqlite":
        assert begin is not None and set(verbs[:begin]) == {"SELECT"}
        assert verbs[begin:] == ["BEGIN", "UPDATE", "INSERT", "INSERT", "COMMIT"]
    else:
        assert [q["sql"] for q in queries[:2]] == ["BEGIN", CHUNK_SETTINGS]



def test_a_chunk_another_planner_wrote_first_is_lost_at_once(registry_files, monkeypatch, caplog):
    """SQLite: two planners read the same chunk and the other one writes it whole (proposals
    and all) first. This one loses it at its compare-and-swap — 0, ``planning_chunk_lost`` —
    instead of meeting the other's proposals and planning every event again alone."""
    if connection.vendor == "postgresql":
        pytest.skip("the claim's row locks keep a second planner off the chunk until it commits")
    for n in range(3):
        inject(f"work-{n}", "factory.work.requested", {"repo": "hello"})
    triage_backlog(3)
    registry = get_registry()
    rows = planning_batch._rows
    other = []

    def the_other_planner_writes_first(decided, registry, now):
        # Between this planner's decisions and its write, as another process's would.
        if not other:
            other.append(None)
            other[0] = planning_batch.plan_batch(now=now, registry=registry)
        return rows(decided, registry, now)

    monkeypatch.setattr(planning_batch, "_rows", the_other_planner_writes_first)
    alone = []
    monkeypatch.setattr(planning_batch, "plan_event", lambda *args, **kwargs: alone.append(args))
    with caplog.at_level(logging.INFO, logger="runtime.services.planning_batch"):
        assert planning_batch.plan_batch(now=NOW, registry=registry) == 0
    assert (other, alone) == ([6], [])
    assert [(r.levelname, r.action) for r in caplog.records if r.name == "runtime.services.planning_batch"
            and r.action.startswith("planning_chunk_")] == [("INFO", "planning_chunk_lost")]
    assert Proposal.objects.count() == 6
