"""Interrupted runs (docs/design.md §8): a mutating attempt cut short waits for an operator's retry or close."""

import getpass
import io
import logging
from datetime import timedelta

import pytest
from django.core.management import call_command

from runtime.models import Event, JournalEntry, Proposal, Run
from runtime.services import interrupted
from runtime.services.approval import ApprovalRefused, approve_proposal
from runtime.services.interrupted import RunDecisionRefused, close_run, retry_run
from runtime.services.runs import claim_next_run, expire_leases, fail_attempt, start_run
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOW = at("2026-11-30T21:01:00Z")


@pytest.fixture
def reaper_run(registry_files, approver):
    """The reaper (mutating, singleton, maxAttempts 2) approved and claimed, its first attempt running."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    run = approve_proposal(Proposal.objects.get().pk, user=approver, now=NOW)
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    assert start_run(claimed, worker="w1", now=NOW)
    return run


def interrupt(run, *, now=NOW, reason="worker_stopped"):
    return fail_attempt(run.pk, reason=reason, now=now, worker="w1", interrupted=True)


def journal(run, *actions):
    return [(e.action, e.actor, e.actor_name, e.data) for e in JournalEntry.objects.filter(run=run, action__in=actions).order_by("id")]


def test_a_stopped_mutating_attempt_makes_the_run_interrupted_not_requeued(reaper_run):
    assert interrupt(reaper_run) == "interrupted"
    reaper_run.refresh_from_db()
    assert (reaper_run.status, reaper_run.reason, reaper_run.attempt, reaper_run.worker) == ("interrupted", "worker_stopped", 1, "w1")
    assert journal(reaper_run, "run_interrupted") == [
        ("run_interrupted", "system", "", {"reason": "worker_stopped", "attempt": 1, "maxAttempts": 2, "worker": "w1"})
    ]
    assert claim_next_run(worker="w2", now=NOW, lease_seconds=60) is None


def test_an_expired_lease_of_a_mutating_run_is_interrupted_past_the_margin_only(reaper_run, settings):
    settings.FACTORY_LEASE_SECONDS = 60
    assert expire_leases(now=NOW + timedelta(seconds=60 + 24)) == 0
    assert expire_leases(now=NOW + timedelta(seconds=60 + 26)) == 1
    reaper_run.refresh_from_db()
    assert (reaper_run.status, reaper_run.reason) == ("interrupted", "lease_expired")


def test_an_interrupted_run_holds_its_singleton_loop(reaper_run, approver):
    interrupt(reaper_run)
    tick("2026-11-30T22:00:10Z")
    event = Event.objects.get(uid="clock:reaper:2026-11-30T22:00:00Z")
    assert (event.planning_outcome, event.planning_reason) == ("NOOP", "previous_run_in_flight")


def test_retry_queues_one_new_attempt_journaled_with_the_operator(reaper_run, approver):
    interrupt(reaper_run)
    retried = retry_run(reaper_run.pk, user=approver, now=NOW, via="cli", os_user="ops")
    assert (retried.status, retried.attempt, retried.max_attempts) == ("queued", 1, 2)
    assert journal(reaper_run, "run_retried") == [
        ("run_retried", "operator", "alice", {"via": "cli", "osUser": "ops", "attempt": 1, "maxAttempts": 2})
    ]
    assert claim_next_run(worker="w2", now=NOW, lease_seconds=60).attempt == 2


def test_a_retried_run_is_queued_at_the_instant_of_the_retry(reaper_run, approver):
    interrupt(reaper_run)
    later = NOW + timedelta(minutes=9)
    retried = retry_run(reaper_run.pk, user=approver, now=later)
    assert (retried.status, retried.queued_at, retried.worker) == ("queued", later, "")


def test_a_retry_made_with_an_api_token_journals_the_tokens_label(reaper_run, approver):
    interrupt(reaper_run)
    retry_run(reaper_run.pk, user=approver, now=NOW, via="api", token_label="alice's laptop")
    assert journal(reaper_run, "run_retried") == [
        ("run_retried", "operator", "alice", {"via": "api", "tokenLabel": "alice's laptop", "attempt": 1, "maxAttempts": 2})
    ]


@pytest.mark.parametrize("decide", [retry_run, close_run])
def test_a_decision_that_another_overtook_is_refused_and_journals_nothing(reaper_run, approver, monkeypatch, decide):
    interrupt(reaper_run)
    found = interrupted._interrupted_run

    def closed_meanwhile(run_id):
        run = found(run_id)
        Run.objects.filter(pk=run_id).update(status="abandoned")  # another operator's close, between the read and the update
        return run

    monkeypatch.setattr(interrupted, "_interrupted_run", closed_meanwhile)
    with pytest.raises(RunDecisionRefused) as refused:
        decide(reaper_run.pk, user=approver, now=NOW)
    assert (refused.value.code, refused.value.detail) == ("not_interrupted", f"run {reaper_run.pk} was decided meanwhile")
    assert journal(reaper_run, "run_retried", "run_closed") == []


def test_retry_with_the_budget_spent_grants_exactly_one_more_attempt(reaper_run, approver):
    interrupt(reaper_run)
    retry_run(reaper_run.pk, user=approver, now=NOW)
    again = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    start_run(again, worker="w1", now=NOW)
    assert interrupt(again) == "interrupted"
    retried = retry_run(reaper_run.pk, user=approver, now=NOW)
    assert (retried.status, retried.attempt, retried.max_attempts) == ("queued", 2, 3)
    assert journal(reaper_run, "run_retried")[-1][3] == {"via": "admin", "attempt": 2, "maxAttempts": 3}


def test_close_ends_the_run_with_the_note_and_frees_the_loop(reaper_run, approver):
    interrupt(reaper_run)
    closed = close_run(reaper_run.pk, user=approver, now=NOW, note="did it by hand", via="cli", os_user="ops")
    assert (closed.status, closed.reason, closed.summary, closed.finished_at) == (
        "abandoned", "closed_by_operator", "did it by hand", NOW
    )
    assert journal(reaper_run, "run_closed") == [
        ("run_closed", "operator", "alice", {"via": "cli", "osUser": "ops", "note": "did it by hand"})
    ]
    released = JournalEntry.objects.get(action="idempotency_key_released")
    assert (released.actor, released.proposal_id, released.data) == (
        "system", closed.proposal_id, {"idempotencyKey": "reaper:2026-11-30T21:00:00Z", "reason": "closed"}
    )
    tick("2026-11-30T22:00:10Z")
    assert Event.objects.get(uid="clock:reaper:2026-11-30T22:00:00Z").planning_outcome == "PROPOSED"


def test_a_close_is_logged_and_journals_the_api_tokens_label(reaper_run, approver, caplog):
    interrupt(reaper_run)
    with caplog.at_level(logging.INFO, logger="runtime.services.interrupted"):
        close_run(reaper_run.pk, user=approver, now=NOW, via="api", token_label="alice's laptop")
    assert journal(reaper_run, "run_closed") == [
        ("run_closed", "operator", "alice", {"via": "api", "tokenLabel": "alice's laptop"})
    ]
    (logged,) = [r for r in caplog.records if r.name == "runtime.services.interrupted"]
    assert (logged.getMessage(), logged.action, logged.run) == (
        f"interrupted run {reaper_run.pk} closed by alice via api", "run_closed", reaper_run.pk,
    )


def test_a_note_over_2000_characters_is_refused_and_the_run_stays_interrupted(reaper_run, approver):
    interrupt(reaper_run)
    with pytest.raises(RunDecisionRefused) as refused:
        close_run(reaper_run.pk, user=approver, now=NOW, note="x" * 2001)
    assert (refused.value.code, refused.value.status, refused.value.detail) == (
        "note_too_long", 400, "the note has 2001 characters; at most 2000"
    )
    reaper_run.refresh_from_db()
    assert (reaper_run.status, close_run(reaper_run.pk, user=approver, now=NOW, note="x" * 2000).status) == (
        "interrupted", "abandoned"
    )


def test_a_retried_run_leaves_its_last_worker_behind(reaper_run, approver):
    interrupt(reaper_run)
    assert retry_run(reaper_run.pk, user=approver, now=NOW).worker == ""


@pytest.mark.parametrize("decide", [retry_run, close_run])
def test_deciding_needs_the_permission_and_an_interrupted_run(reaper_run, viewer, approver, decide):
    with pytest.raises(RunDecisionRefused) as refused:
        decide(reaper_run.pk, user=approver, now=NOW)
    assert (refused.value.code, refused.value.status) == ("not_interrupted", 409)
    interrupt(reaper_run)
    with pytest.raises(RunDecisionRefused) as refused:
        decide(reaper_run.pk, user=viewer, now=NOW)
    assert (refused.value.code, refused.value.status) == ("permission_denied", 403)
    with pytest.raises(RunDecisionRefused) as refused:
        decide(10**6, user=approver, now=NOW)
    assert (refused.value.code, refused.value.status, refused.value.detail) == ("not_found", 404, "there is no run 1000000")
    assert isinstance(refused.value, ApprovalRefused)
    assert Run.objects.get(pk=reaper_run.pk).status == "interrupted"
    assert not JournalEntry.objects.filter(action__in=["run_retried", "run_closed"]).exists()


def test_a_non_mutating_interrupted_attempt_is_requeued_within_its_budget(registry_files):
    from tests.helpers import inject

    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n")
    inject("scan-1", "factory.work.requested", {"repo": "hello"})
    tick("2026-11-30T10:00:10Z")
    run = Run.objects.get()
    assert run.plan["mutating"] is False
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    start_run(claimed, worker="w1", now=NOW)
    assert fail_attempt(run.pk, reason="worker_stopped", now=NOW, worker="w1", interrupted=True) == "queued"


def run_cli(name, *args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue().strip(), err.getvalue().strip()


def test_retry_and_close_from_the_cli(reaper_run, approver, viewer):
    assert run_cli("retry_run", str(reaper_run.pk), "--as", "alice") == (
        2, "", f"refused: not_interrupted: run {reaper_run.pk} is running, not interrupted"
    )
    interrupt(reaper_run)
    assert run_cli("close_run", str(reaper_run.pk), "--as", "victor") == (
        2, "", "refused: permission_denied: victor lacks the approve_proposal permission"
    )
    assert run_cli("retry_run", str(reaper_run.pk), "--as", "alice") == (
        0, f"retried run {reaper_run.pk} as alice: queued for attempt 2/2", ""
    )
    entry = JournalEntry.objects.get(action="run_retried")
    assert (entry.actor, entry.actor_name, entry.data) == (
        "operator", "alice", {"via": "cli", "osUser": getpass.getuser(), "attempt": 1, "maxAttempts": 2}
    )
    again = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    start_run(again, worker="w1", now=NOW)
    interrupt(again)
    assert run_cli("close_run", str(reaper_run.pk), "--as", "alice", "--note", "done by hand") == (
        0, f"closed run {reaper_run.pk} as alice", ""
    )
    entry = JournalEntry.objects.get(action="run_closed")
    assert (entry.actor, entry.actor_name, entry.data) == (
        "operator", "alice", {"via": "cli", "osUser": getpass.getuser(), "note": "done by hand"}
    )
    assert run_cli("runs", "--status", "interrupted", "--json")[1] == "[]"


def test_approving_beside_an_interrupted_run_is_refused_and_says_what_to_do(registry_files, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    older, newer = Proposal.objects.order_by("id")
    run = approve_proposal(older.pk, user=approver, now=NOW)          # the newer one stays pending
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    start_run(claimed, worker="w1", now=NOW)
    interrupt(run)
    with pytest.raises(ApprovalRefused) as refused:
        approve_proposal(newer.pk, user=approver, now=NOW)
    assert (refused.value.code, refused.value.status, refused.value.detail) == (
        "previous_run_in_flight", 409,
        f"loop reaper has run {run.pk} interrupted: retry or close it first; proposal {newer.pk} stays pending",
    )
