"""``runtime.services.runs.fail_attempt``: a failed attempt moves only the run it names, and only
as it was read — a row another worker or the sweep moved between the read and the update is
left alone — and a stored plan without ``mutating`` counts as mutating (docs/design.md §8)."""

import logging
from contextlib import contextmanager
from datetime import timedelta
from unittest import mock

import pytest
from django.db.models import QuerySet

from runtime.models import JournalEntry, Run
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from tests.conftest import at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")


def _running(*repos, worker="w1"):
    """A work-scan run (read-only, maxAttempts 2) for each repo, claimed and started by ``worker``."""
    for n, repo in enumerate(repos):
        inject(f"op-{n}", "factory.work.requested", {"repo": repo}, instant="2026-11-30T10:00:00Z")
    plan_pending(now=NOW)
    runs = [claim_next_run(worker=worker, now=NOW, lease_seconds=60) for _ in repos]
    for run in runs:
        assert start_run(run, worker=worker, now=NOW) is True
    return runs


def _state(run):
    stored = Run.objects.get(pk=run.pk)
    return stored.status, stored.attempt, stored.worker, stored.reason


def _actions(run):
    return [e.action for e in JournalEntry.objects.filter(run=run).order_by("id")]


@contextmanager
def _moved_after_read(run, **changes):
    """The row of ``run`` changed (``changes``) just after ``fail_attempt`` has read it, as by
    another worker or the sweep committing in between."""
    first = QuerySet.first
    done = []

    def read_then_move(queryset):
        found = first(queryset)
        if not done and isinstance(found, Run) and found.pk == run.pk:
            done.append(True)
            Run.objects.filter(pk=run.pk).update(**changes)
        return found

    with mock.patch.object(QuerySet, "first", read_then_move):
        yield
    assert done


def test_an_unknown_run_fails_no_attempt(registry_files):
    """No such run: None, and nothing else moves."""
    (run,) = _running("alpha")
    assert fail_attempt(run.pk + 1000, reason="timeout", now=NOW) is None
    assert _state(run) == ("running", 1, "w1", "")


def test_a_failed_attempt_moves_only_the_run_it_names(registry_files):
    """Two runs of one worker, both running their first attempt: the first is requeued, the
    second runs on, unjournaled."""
    first, second = _running("alpha", "beta")
    assert fail_attempt(first.pk, reason="timeout", now=NOW, worker="w1") == "queued"
    assert _state(first) == ("queued", 1, "", "timeout")
    assert _state(second) == ("running", 1, "w1", "")
    assert _actions(second) == ["run_queued", "run_claimed", "run_started"]


@pytest.mark.parametrize("changes", [
    {"status": "interrupted"},        # the sweep interrupted it: same attempt, same worker
    {"attempt": 2},                    # requeued and claimed again by the same worker
    {"worker": "w2"},                  # claimed by another worker
], ids=["status", "attempt", "worker"])
def test_a_run_moved_between_the_read_and_the_update_is_left_alone(registry_files, changes):
    """The update is a compare-and-swap on the status, attempt and worker read: when any of them
    changed meanwhile, nothing is written or journaled and the answer is None."""
    (run,) = _running("alpha")
    moved = (changes.get("status", "running"), changes.get("attempt", 1), changes.get("worker", "w1"), "")
    with _moved_after_read(run, **changes):
        assert fail_attempt(run.pk, reason="timeout", now=NOW + timedelta(seconds=5)) is None
    assert _state(run) == moved
    assert _actions(run) == ["run_queued", "run_claimed", "run_started"]


def test_a_stored_plan_without_mutating_counts_as_mutating(registry_files):
    """A run whose stored plan does not say whether it mutates (a row written before the field)
    is treated as mutating: its interrupted attempt waits as ``interrupted``, keeping its
    worker, where a read-only run's would be requeued."""
    first, second = _running("alpha", "beta")
    plan = dict(first.plan)
    assert plan.pop("mutating") is False
    Run.objects.filter(pk=first.pk).update(plan=plan)
    assert fail_attempt(first.pk, reason="worker_stopped", now=NOW, interrupted=True) == "interrupted"
    assert fail_attempt(second.pk, reason="worker_stopped", now=NOW, interrupted=True) == "queued"
    assert _state(first) == ("interrupted", 1, "w1", "worker_stopped")
    assert _state(second) == ("queued", 1, "", "worker_stopped")


def test_each_failed_attempt_is_logged_a_requeue_as_a_warning_an_end_as_an_error(registry_files, caplog):
    """The log names the run, the attempt of the budget, the reason (with the detail when given)
    and the new status: a warning for a requeued run, an error for an abandoned one."""
    (run,) = _running("alpha")
    with caplog.at_level(logging.INFO, logger="runtime.services.runs"):
        assert fail_attempt(run.pk, reason="timeout", now=NOW, detail="/runs/1: EIO") == "queued"
        claimed = claim_next_run(worker="w2", now=NOW, lease_seconds=60)
        assert fail_attempt(claimed.pk, reason="lease_expired", now=NOW) == "abandoned"
    assert [(r.levelname, r.getMessage(), r.action, r.run) for r in caplog.records
            if r.name == "runtime.services.runs"] == [
        ("WARNING", f"run {run.pk} attempt 1/2 failed (timeout: /runs/1: EIO): queued", "run_attempt_failed", run.pk),
        ("ERROR", f"run {run.pk} attempt 2/2 failed (lease_expired): abandoned", "run_attempt_failed", run.pk),
    ]
