"""``runtime.services.runs``: the exact rows and journal entries of a run's transitions —
queued, claimed, started, renewed, finished, failed or expired — value by value
(docs/design.md §8)."""

import json
from datetime import timedelta

import pytest
from django.db import transaction

from runtime.models import Actor, JournalEntry, Proposal, Run
from runtime.services.approval import approve_proposal
from runtime.services.bulk_rows import stored_instant
from runtime.services.runs import (
    claim_next_run,
    expire_leases,
    expiry_margin,
    fail_attempt,
    queue_run,
    record_lease_lost,
    renew_lease,
    renewal_interval,
    run_queued_entry,
    start_run,
    waiting_work,
)
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:01:00Z")


def _data(value):
    return value if isinstance(value, dict) else json.loads(value)


def test_a_run_queued_entry_names_the_runs_actor_and_no_approver_by_default():
    """A door's auto-approval queues the run as the door's actor with an empty actor name."""
    entry = run_queued_entry({"actor": Actor.SCHEDULE, "event_id": 3, "proposal_id": 4, "definition": "heartbeat@1"},
                             run_id=5, now=NOW)
    assert entry[:7] == (stored_instant(NOW), "run_queued", "schedule", "", 3, 4, 5)
    assert _data(entry[7]) == {"definition": "heartbeat@1"}


WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


@pytest.fixture
def reaper(registry_files, approver):
    """The reaper (mutating, singleton, maxAttempts 2) approved by alice, queued."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    return approve_proposal(Proposal.objects.get().pk, user=approver, now=NOW)


def _journal(run):
    return [(e.action, e.actor, e.actor_name, e.event_id, e.proposal_id, e.data)
            for e in JournalEntry.objects.filter(run=run).order_by("id")]


def test_queue_claim_and_start_journal_who_and_which_attempt(reaper):
    """Queued by the approver, claimed and started by the system naming the worker and attempt;
    the claimed row holds the worker, the attempt and the lease's end."""
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert (claimed.pk, claimed.status, claimed.attempt, claimed.worker) == (reaper.pk, "claimed", 1, "w1")
    assert (claimed.lane, claimed.actor, claimed.approved_by.get_username()) == ("loop:reaper", "operator", "alice")
    assert (claimed.claimed_at, claimed.lease_expires_at) == (NOW, NOW + timedelta(seconds=60))
    assert start_run(claimed, worker="w2", now=NOW) is False  # not the worker holding it
    assert start_run(claimed, worker="w1", now=NOW + timedelta(seconds=1)) is True
    assert start_run(claimed, worker="w1", now=NOW) is False  # no longer claimed
    run = Run.objects.get(pk=reaper.pk)
    assert (run.status, run.started_at) == ("running", NOW + timedelta(seconds=1))
    ids = (reaper.event_id, reaper.proposal_id)
    assert _journal(reaper) == [
        ("run_queued", "operator", "alice", *ids, {"definition": "reaper@1"}),
        ("run_claimed", "system", "", reaper.event_id, None, {"worker": "w1", "attempt": 1}),
        ("run_started", "system", "", reaper.event_id, None, {"worker": "w1", "attempt": 1}),
    ]


def _running(reaper, worker="w1"):
    claimed = claim_next_run(worker=worker, now=NOW, lease_seconds=60)
    assert start_run(claimed, worker=worker, now=NOW)
    return claimed


def test_a_renewal_extends_the_lease_of_the_holder_only(reaper):
    """The lease ends ``lease_seconds`` after the renewal's ``now``; another worker renews nothing."""
    run = _running(reaper)
    assert renew_lease(run.pk, worker="w1", now=NOW + timedelta(seconds=20), lease_seconds=45) is True
    assert Run.objects.get(pk=run.pk).lease_expires_at == NOW + timedelta(seconds=65)
    assert renew_lease(run.pk, worker="w2", now=NOW + timedelta(seconds=30), lease_seconds=45) is False
    assert Run.objects.get(pk=run.pk).lease_expires_at == NOW + timedelta(seconds=65)


def test_a_failed_attempt_within_budget_is_requeued_then_abandoned_with_its_key(reaper):
    """Not interrupted: requeued (worker cleared, no end) within the budget; the last attempt
    abandons the run, ends it and releases its key; each journaled with its detail."""
    run = _running(reaper)
    assert fail_attempt(run.pk, reason="timeout", now=NOW, worker="w1", detail="/runs/1: EIO") == "queued"
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.worker, stored.reason, stored.lease_expires_at, stored.finished_at) == (
        "queued", "", "timeout", None, None)
    assert fail_attempt(run.pk, reason="timeout", now=NOW, worker="w1") is None  # no longer leased
    run = _running(reaper, worker="w2")
    assert fail_attempt(run.pk, reason="timeout", now=NOW + timedelta(seconds=5), worker="w1") is None
    assert fail_attempt(run.pk, reason="timeout", now=NOW + timedelta(seconds=5), worker="w2") == "abandoned"
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.worker, stored.finished_at, stored.attempt) == (
        "abandoned", "", NOW + timedelta(seconds=5), 2)
    assert [entry[::5] for entry in _journal(reaper) if entry[0] in ("run_requeued", "run_abandoned")] == [
        ("run_requeued", {"reason": "timeout", "attempt": 1, "maxAttempts": 2, "detail": "/runs/1: EIO"}),
        ("run_abandoned", {"reason": "timeout", "attempt": 2, "maxAttempts": 2}),
    ]
    assert Proposal.objects.get().key_released_at == NOW + timedelta(seconds=5)


def test_an_interrupted_mutating_attempt_keeps_its_worker(reaper):
    """A mutating run's interrupted attempt waits as ``interrupted``, keeping the worker, and the
    journal names it."""
    run = _running(reaper)
    assert fail_attempt(run.pk, reason="worker_stopped", now=NOW, worker="w1", interrupted=True) == "interrupted"
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.worker, stored.finished_at, stored.lease_expires_at) == (
        "interrupted", "w1", None, None)
    # It keeps the worker, but that worker's lease is over: a renewal finds nothing to renew.
    assert renew_lease(run.pk, worker="w1", now=NOW, lease_seconds=60) is False
    assert Run.objects.get(pk=run.pk).lease_expires_at is None
    assert _journal(reaper)[-1][::5] == (
        "run_interrupted", {"reason": "worker_stopped", "attempt": 1, "maxAttempts": 2, "worker": "w1"})


def test_a_lost_lease_is_journaled_with_the_worker_and_attempt(reaper):
    """``record_lease_lost`` journals the worker that killed its command; nothing for no run."""
    run = _running(reaper)
    record_lease_lost(run.pk, worker="w1", attempt=1, now=NOW)
    record_lease_lost(run.pk + 1000, worker="w1", attempt=1, now=NOW)
    assert _journal(reaper)[-1] == ("run_lease_lost", "system", "", reaper.event_id, None, {"worker": "w1", "attempt": 1})
    assert JournalEntry.objects.filter(action="run_lease_lost").count() == 1


def test_the_renewal_interval_and_expiry_margin():
    """A third of the lease, at least a second; the margin adds the command's kill grace."""
    assert (renewal_interval(60), renewal_interval(2), renewal_interval(3)) == (20.0, 1.0, 1.0)
    assert expiry_margin(60) == timedelta(seconds=25)
    assert expiry_margin(1) == timedelta(seconds=6)


def test_waiting_work_and_the_sweep_agree_on_an_expired_lease(reaper, settings):
    """Queued, then leased: expired only past the lease plus the margin (the setting's by
    default), and the sweep takes back exactly then."""
    settings.FACTORY_LEASE_SECONDS = 60
    def waiting(at_, **margin):
        answer = waiting_work(clock=lambda: at_, **margin)
        return answer.queued, answer.expired

    assert waiting(NOW) == (True, False)
    run = _running(reaper)
    end = NOW + timedelta(seconds=60)
    assert waiting(end + timedelta(seconds=25)) == (False, False)
    assert waiting(end + timedelta(seconds=26)) == (False, True)
    assert waiting(end + timedelta(seconds=11), margin=timedelta(seconds=10)) == (False, True)
    assert expire_leases(now=end + timedelta(seconds=11), margin=timedelta(seconds=12)) == 0
    assert expire_leases(now=end + timedelta(seconds=25)) == 0
    assert expire_leases(now=end + timedelta(seconds=26)) == 1
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.reason) == ("interrupted", "lease_expired")


def test_a_run_queued_without_an_approver_names_nobody(registry_files):
    """``queue_run`` for a door's auto-approval: the door's actor, no approver, an empty actor
    name in the journal, the lane of the tick's loop."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    with transaction.atomic():
        run = queue_run(proposal, actor=Actor.SCHEDULE, approved_by=None, now=NOW)
    stored = Run.objects.get(pk=run.pk)
    assert (stored.actor, stored.approved_by_id, stored.lane, stored.status, stored.queued_at) == (
        "schedule", None, "loop:reaper", "queued", NOW)
    assert _journal(run) == [
        ("run_queued", "schedule", "", proposal.event_id, proposal.pk, {"definition": "reaper@1"}),
    ]
