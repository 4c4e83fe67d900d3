"""``runtime.services.approval`` rule by rule: who may decide, what a decision writes (the
proposal's row, the journal's entry, its ``data``), what approving supersedes, and each refusal
word for word (docs/design.md §7)."""

import logging
from datetime import timedelta

import pytest

from runtime.models import JournalEntry, Proposal, Run
from runtime.services.approval import (
    ApprovalRefused,
    approve_proposal,
    older_pending,
    reject_proposal,
    superseded_by,
)
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run, fail_attempt, start_run
from tests.conftest import SHA, at
from tests.helpers import PREVIEW_WAITING, inject, many_loops, tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOW = at("2026-11-30T23:01:00Z")


@pytest.fixture
def reaper(registry_files):
    """Three pending proposals of the watched, singleton reaper loop, oldest first."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    for instant in ("2026-11-30T21:00:10Z", "2026-11-30T22:00:10Z", "2026-11-30T23:00:10Z"):
        tick(instant)
    return list(Proposal.objects.order_by("id"))


def merge(number: int) -> dict:
    """A merge-apply request's payload (no loop, no preview)."""
    return {"repo": "alpha", "prNumber": number, "headSha": SHA, "evidence": {"prNumber": number, "headSha": SHA}}


def decided(*proposals) -> list[tuple]:
    return list(Proposal.objects.filter(pk__in=[p.pk for p in proposals]).order_by("id").values_list(
        "status", "actor", "decided_by__username", "decided_at", "note"))


def entries(action: str) -> list[tuple]:
    return list(JournalEntry.objects.filter(action=action).order_by("id").values_list(
        "actor", "actor_name", "at", "event_id", "proposal_id", "run_id", "data"))


def refusal(call) -> tuple:
    with pytest.raises(ApprovalRefused) as refused:
        call()
    return refused.value.code, refused.value.status, refused.value.detail


@pytest.mark.parametrize("decide", [approve_proposal, reject_proposal])
def test_only_an_active_user_with_the_permission_decides(decide, reaper, approver, viewer, django_user_model):
    """Nobody, a user without ``approve_proposal``, and an inactive user who holds it are each
    refused (403, named); the proposal stays pending and nothing is journaled."""
    sleeper = django_user_model.objects.create_user("sam", is_active=False)
    sleeper.user_permissions.set(approver.user_permissions.all())
    assert sleeper.has_perm("runtime.approve_proposal") is False  # inactive: Django grants nothing
    proposal = reaper[0]
    assert refusal(lambda: decide(proposal.pk, user=None, now=NOW)) == (
        "permission_denied", 403, "nobody lacks the approve_proposal permission")
    assert refusal(lambda: decide(proposal.pk, user=viewer, now=NOW)) == (
        "permission_denied", 403, "victor lacks the approve_proposal permission")
    assert refusal(lambda: decide(proposal.pk, user=sleeper, now=NOW)) == (
        "permission_denied", 403, "sam lacks the approve_proposal permission")
    assert decided(proposal) == [("pending", "", None, None, "")]
    assert JournalEntry.objects.filter(action__in=["proposal_approved", "proposal_rejected"]).count() == 0


def test_an_inactive_user_is_refused_whatever_the_permission_check_says(reaper, approver, monkeypatch):
    """``is_active`` is checked by itself: an inactive user is refused even where a backend
    would grant the permission."""
    approver.is_active = False
    monkeypatch.setattr(type(approver), "has_perm", lambda self, perm, obj=None: True)
    assert refusal(lambda: approve_proposal(reaper[0].pk, user=approver, now=NOW)) == (
        "permission_denied", 403, "alice lacks the approve_proposal permission")
    assert refusal(lambda: reject_proposal(reaper[0].pk, user=approver, now=NOW)) == (
        "permission_denied", 403, "alice lacks the approve_proposal permission")


def test_a_bad_note_is_refused_before_anything_is_written(reaper, approver):
    """A note too long, or with a NUL, is refused (400) and the proposal stays pending."""
    assert refusal(lambda: approve_proposal(reaper[2].pk, user=approver, now=NOW, note="x" * 2001)) == (
        "note_too_long", 400, "the note has 2001 characters; at most 2000")
    assert refusal(lambda: reject_proposal(reaper[2].pk, user=approver, now=NOW, note="a\x00b")) == (
        "invalid_note", 400, "the note holds U+0000 (NUL), which no journal entry can carry")
    assert [p.status for p in Proposal.objects.order_by("id")] == ["pending", "pending", "pending"]


def test_an_approval_writes_the_proposal_the_journal_and_the_queued_run(reaper, approver, caplog):
    """The approved proposal names its operator, instant and note; ``proposal_approved`` is
    journaled by the operator with the decision's data and the preview seen; the run returned
    is the queued run of that proposal; the log line names the proposal, approver and door."""
    first, second, third = reaper
    with caplog.at_level(logging.INFO, logger="runtime.services.approval"):
        run = approve_proposal(
            third.pk, user=approver, now=NOW, note="go", via="cli", os_user="alice-os", token_label="laptop")
    assert (run.proposal_id, run.status, run.approved_by.username) == (third.pk, "queued", "alice")
    assert Run.objects.get() == run
    assert decided(third) == [("approved", "operator", "alice", NOW, "go")]
    assert entries("proposal_approved") == [(
        "operator", "alice", NOW, third.event_id, third.pk, None,
        {"via": "cli", "osUser": "alice-os", "tokenLabel": "laptop", "note": "go", "preview": PREVIEW_WAITING},
    )]
    assert [(r.getMessage(), r.action, r.proposal) for r in caplog.records if r.name == "runtime.services.approval"] == [
        (f"proposal {third.pk} approved by alice via cli", "proposal_approved", third.pk)]


def test_a_decisions_data_holds_only_what_was_given(registry_files, approver):
    """``data`` is ``via`` alone for a bare decision; an OS user, a token's label and a note
    join it only when given (a proposal without a preview journals none)."""
    inject("op-merge-7", "factory.merge-apply.requested", merge(7))
    inject("op-merge-8", "factory.merge-apply.requested", merge(8))
    inject("op-merge-9", "factory.merge-apply.requested", merge(9))
    plan_pending(now=NOW)
    seven, eight, nine = (Proposal.objects.get(event__uid=f"op-merge-{n}") for n in (7, 8, 9))
    approve_proposal(seven.pk, user=approver, now=NOW)
    approve_proposal(eight.pk, user=approver, now=NOW, via="api", os_user="", token_label="ci")
    reject_proposal(nine.pk, user=approver, now=NOW, via="cli", os_user="root", note="no")
    assert [data for *_, data in entries("proposal_approved")] == [{"via": "admin"}, {"via": "api", "tokenLabel": "ci"}]
    assert [data for *_, data in entries("proposal_rejected")] == [{"via": "cli", "osUser": "root", "note": "no"}]


def test_approving_supersedes_the_older_pending_proposals_of_its_loop_only(reaper, approver):
    """Approving the middle proposal supersedes the oldest (system, the instant, the note
    naming it, journaled with the approver) and leaves the newer one pending."""
    first, second, third = reaper
    assert list(older_pending(second)) == [first]
    approve_proposal(second.pk, user=approver, now=NOW)
    assert decided(first, second, third) == [
        ("superseded", "system", None, NOW, f"superseded by proposal {second.pk}"),
        ("approved", "operator", "alice", NOW, ""),
        ("pending", "", None, None, ""),
    ]
    assert entries("proposal_superseded") == [
        ("system", "", NOW, first.event_id, first.pk, None, {"supersededBy": second.pk, "approvedBy": "alice"}),
    ]
    assert superseded_by(second) == [first.pk]
    assert superseded_by(first) == []


def test_approving_the_newest_supersedes_each_older_one_journaled(reaper, approver):
    """Each superseded proposal gets its own entry."""
    first, second, third = reaper
    approve_proposal(third.pk, user=approver, now=NOW)
    assert sorted(entries("proposal_superseded"), key=lambda entry: entry[4]) == [
        ("system", "", NOW, first.event_id, first.pk, None, {"supersededBy": third.pk, "approvedBy": "alice"}),
        ("system", "", NOW, second.event_id, second.pk, None, {"supersededBy": third.pk, "approvedBy": "alice"}),
    ]
    assert superseded_by(third) == [first.pk, second.pk]


def test_an_event_of_no_loop_supersedes_nothing(registry_files, approver):
    """Proposals of no loop are never superseded: approving the newer leaves the older pending."""
    inject("op-merge-7", "factory.merge-apply.requested", merge(7))
    inject("op-merge-8", "factory.merge-apply.requested", merge(8))
    plan_pending(now=NOW)
    older, newer = Proposal.objects.order_by("id")
    assert (older.loop, newer.loop) == (None, None)
    assert list(older_pending(newer)) == []
    approve_proposal(newer.pk, user=approver, now=NOW)
    assert [p.status for p in Proposal.objects.order_by("id")] == ["pending", "approved"]
    assert superseded_by(newer) == []
    assert entries("proposal_superseded") == []


def test_a_decided_or_missing_proposal_is_refused(reaper, approver):
    """``not_found`` (404) and ``not_pending`` (409), the proposal's status named; a refused
    decision journals nothing more."""
    approve_proposal(reaper[2].pk, user=approver, now=NOW)
    assert refusal(lambda: approve_proposal(10**6, user=approver, now=NOW)) == (
        "not_found", 404, "there is no proposal 1000000")
    assert refusal(lambda: approve_proposal(reaper[2].pk, user=approver, now=NOW)) == (
        "not_pending", 409, f"proposal {reaper[2].pk} is approved, not pending")
    assert refusal(lambda: approve_proposal(reaper[0].pk, user=approver, now=NOW)) == (
        "not_pending", 409, f"proposal {reaper[0].pk} is superseded, not pending")
    assert refusal(lambda: reject_proposal(reaper[1].pk, user=approver, now=NOW)) == (
        "not_pending", 409, f"proposal {reaper[1].pk} is superseded, not pending")
    assert len(entries("proposal_approved")) == 1 and entries("proposal_rejected") == []


def test_a_singleton_loops_run_in_flight_keeps_the_next_approval_pending(registry_files, approver):
    """While the loop's run is queued, or interrupted (then the detail says to retry or close
    it), approving its next proposal is refused (409), naming that run (not a newer one of
    another loop), and the proposal stays pending."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    older, newest = Proposal.objects.order_by("id")
    run = approve_proposal(older.pk, user=approver, now=NOW)
    inject("op-0", "factory.work.requested", {"repo": "alpha"}, instant="2026-11-30T22:30:00Z")
    plan_pending(now=NOW)  # a newer active run, of another loop
    assert Run.objects.filter(status="queued").exclude(pk=run.pk).count() == 1
    assert refusal(lambda: approve_proposal(newest.pk, user=approver, now=NOW)) == (
        "previous_run_in_flight", 409, f"loop reaper has run {run.pk} queued; proposal {newest.pk} stays pending")
    start_run(claim_next_run(worker="w1", now=NOW, lease_seconds=60), worker="w1", now=NOW)
    fail_attempt(run.pk, reason="lease_expired", now=NOW, interrupted=True)
    assert refusal(lambda: approve_proposal(newest.pk, user=approver, now=NOW + timedelta(minutes=1))) == (
        "previous_run_in_flight", 409,
        f"loop reaper has run {run.pk} interrupted: retry or close it first; proposal {newest.pk} stays pending")
    assert decided(newest) == [("pending", "", None, None, "")]
    assert len(entries("proposal_approved")) == 1


def test_a_rejection_releases_the_key_and_returns_the_proposal(reaper, approver):
    """The rejected proposal is returned; its key is released, journaled with the reason."""
    proposal = reject_proposal(reaper[0].pk, user=approver, now=NOW, note="stale")
    assert (proposal.pk, proposal.status) == (reaper[0].pk, "rejected")
    assert decided(reaper[0]) == [("rejected", "operator", "alice", NOW, "stale")]
    assert entries("proposal_rejected") == [
        ("operator", "alice", NOW, reaper[0].event_id, reaper[0].pk, None, {"via": "admin", "note": "stale"})]
    release = JournalEntry.objects.get(action="idempotency_key_released")
    assert (release.proposal_id, release.at, release.data["reason"]) == (reaper[0].pk, NOW, "rejected")
    assert [p.status for p in Proposal.objects.order_by("id")] == ["rejected", "pending", "pending"]


def test_a_proposal_decided_meanwhile_is_not_superseded(reaper, approver, monkeypatch):
    """The update supersedes only proposals still pending: one rejected by another operator
    between the read of the older proposals and the update keeps its decision."""
    from runtime.services import approval

    first, second, third = reaper
    real = approval.older_pending

    class Racing:
        """``older_pending``'s rows, the oldest rejected right after they were read."""

        def __init__(self, proposal):
            self.query = real(proposal)

        def select_related(self, *fields):
            rows = list(self.query.select_related(*fields))
            Proposal.objects.filter(pk=first.pk).update(status="rejected", note="decided meanwhile")
            return rows

    monkeypatch.setattr(approval, "older_pending", Racing)
    approve_proposal(third.pk, user=approver, now=NOW)
    assert [(p.status, p.note) for p in Proposal.objects.order_by("id")] == [
        ("rejected", "decided meanwhile"), ("superseded", f"superseded by proposal {third.pk}"), ("approved", "")]


def test_another_integrity_error_is_raised_as_it_is_though_the_loop_ran_before(reaper, approver, monkeypatch):
    """Only an active run of the loop makes ``previous_run_in_flight``: a loop whose last run
    has ended gets the database's error itself, and the decision is undone."""
    from django.db import IntegrityError

    from runtime.services import approval

    approve_proposal(reaper[0].pk, user=approver, now=NOW)
    Run.objects.update(status="succeeded")

    def refused(*args, **kwargs):
        raise IntegrityError("some other constraint")
    monkeypatch.setattr(approval, "queue_run", refused)
    with pytest.raises(IntegrityError, match="some other constraint"):
        approve_proposal(reaper[2].pk, user=approver, now=NOW)
    assert [p.status for p in Proposal.objects.order_by("id")] == ["approved", "pending", "pending"]


def test_only_pending_proposals_of_the_same_loop_and_key_are_superseded(reaper, approver, registry_files):
    """Older proposals of another key, of another loop, or decided already are left as they
    are and journal nothing."""
    first, second, third = reaper
    reject_proposal(first.pk, user=approver, now=NOW)
    assert list(older_pending(third)) == [second]
    approve_proposal(third.pk, user=approver, now=NOW)
    assert [p.status for p in Proposal.objects.order_by("id")] == ["rejected", "superseded", "approved"]
    assert [entry[4] for entry in entries("proposal_superseded")] == [second.pk]


def test_a_keyed_loop_supersedes_the_older_proposals_of_its_key_only(reaper, approver):
    """One loop, two keys: approving the newest of one key supersedes its older proposal, not
    the other key's."""
    first, second, third = reaper
    Proposal.objects.filter(pk=first.pk).update(loop_key="acme")
    Proposal.objects.filter(pk__in=[second.pk, third.pk]).update(loop_key="globex")
    approve_proposal(third.pk, user=approver, now=NOW)
    assert [p.status for p in Proposal.objects.order_by("id")] == ["pending", "superseded", "approved"]
    assert [entry[4] for entry in entries("proposal_superseded")] == [second.pk]


def test_another_loops_older_proposal_is_not_superseded(registry_files, approver):
    """Two loops, one proposal each: approving the newer leaves the other loop's pending."""
    many_loops(registry_files, 2)
    older, newer = Proposal.objects.order_by("id")
    assert older.loop != newer.loop and older.loop_key == newer.loop_key
    approve_proposal(newer.pk, user=approver, now=NOW)
    assert [p.status for p in Proposal.objects.order_by("id")] == ["pending", "approved"]
    assert entries("proposal_superseded") == []


def test_a_catch_up_all_loop_supersedes_nothing(registry_files, approver):
    """A ``catchUp: all`` loop runs every slot: approving its newest proposal supersedes none."""
    registry_files.write_config(
        "schedule.yaml",
        "schedules:\n  heartbeat:\n    enabled: false\n  sweep:\n    every: 60m\n    eventType: clock.tick.reaper\n"
        "    catchUp: all\n    singleton: false\n    enabled: true\n",
    )
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    *older, newest = Proposal.objects.order_by("id")
    assert newest.catch_up == "all" and older
    assert list(older_pending(newest)) == []
    approve_proposal(newest.pk, user=approver, now=NOW)
    assert set(Proposal.objects.exclude(pk=newest.pk).values_list("status", flat=True)) == {"pending"}
    assert entries("proposal_superseded") == []
