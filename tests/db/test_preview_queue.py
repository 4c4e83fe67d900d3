"""Previews' queue (docs/design.md §8, Previews): which proposals planning queues a preview for,
the order preview threads take them in, what a person's request resets and journals, and a
finish by a worker that no longer holds the row."""

import logging

import pytest

from runtime.models import JournalEntry, Proposal
from runtime.preview_model import Preview
from runtime.registry import store
from runtime.services.previews import (
    claim_preview,
    finish_preview,
    queue_previews,
    request_preview,
    waiting_previews,
)
from tests.conftest import at
from tests.helpers import many_loops

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:08:00Z")


def proposals() -> list[Proposal]:
    return list(Proposal.objects.order_by("id"))


def test_a_person_requested_preview_is_taken_first_then_the_oldest(registry_files, settings, approver, caplog):
    """Three proposals, a queue of 2: the oldest gets no row (logged), a person's request creates
    one, journaled with the token's label, and a preview thread takes it first though it is the
    newest row; then the oldest row, running until its time-out plus 15 s."""
    settings.FACTORY_PREVIEW_QUEUE = 2
    with caplog.at_level(logging.INFO, logger="runtime.services.previews"):
        many_loops(registry_files, 3)
    first, second, third = proposals()
    assert [(r.levelname, r.getMessage(), r.action) for r in caplog.records if r.name == "runtime.services.previews"] == [
        ("INFO", "1 proposal(s) not previewed: 2 preview(s) wait (FACTORY_PREVIEW_QUEUE=2)", "previews_not_queued")]
    caplog.clear()
    assert list(Preview.objects.order_by("id").values_list("proposal_id", "status")) == [
        (third.pk, "pending"), (second.pk, "pending")]
    assert waiting_previews() == 2

    with caplog.at_level(logging.INFO, logger="runtime.services.previews"):
        asked = request_preview(first.pk, user=approver, now=NOW, registry=store.current(), via="api", token_label="ci")
    assert [(r.levelname, r.getMessage(), r.action, r.proposal) for r in caplog.records
            if r.name == "runtime.services.previews"] == [
        ("INFO", f"preview of proposal {first.pk} asked for by alice via api", "proposal_preview_requested", first.pk)]
    assert (asked.proposal_id, asked.status, asked.requested_by, asked.requested_at, asked.timeout_seconds) == (
        first.pk, "pending", approver, NOW, 60)
    assert asked.argv == first.plan["argv"][:-1]
    assert asked.registry_digest == store.current().digest
    entry = JournalEntry.objects.get(action="proposal_preview_requested")
    assert (entry.actor, entry.actor_name, entry.proposal_id, entry.event_id, entry.at, entry.data) == (
        "operator", "alice", first.pk, first.event_id, NOW, {"via": "api", "tokenLabel": "ci"})
    assert waiting_previews() == 3

    taken = claim_preview(worker="w1", clock=lambda: NOW)
    assert (taken.pk, taken.proposal_id, taken.status, taken.worker, taken.started_at, taken.deadline_at) == (
        asked.pk, first.pk, "running", "w1", NOW, at("2026-11-30T21:09:15Z"))
    assert claim_preview(worker="w2", clock=lambda: NOW).proposal_id == third.pk
    assert claim_preview(worker="w3", clock=lambda: NOW).proposal_id == second.pk
    assert claim_preview(worker="w4", clock=lambda: NOW) is None
    assert waiting_previews() == 0


def test_a_finish_by_another_worker_is_refused_and_the_holders_is_journaled(registry_files, approver):
    """``finish_preview`` records nothing and answers False for a worker that does not hold the
    row; the holder's finish is recorded and journaled with its duration and requester."""
    many_loops(registry_files, 1)
    (proposal,) = proposals()
    preview = claim_preview(worker="w1", clock=lambda: NOW)
    later = at("2026-11-30T21:08:01.2345Z")
    assert finish_preview(preview, worker="w2", now=later, status="done", outcome="X") is False
    assert (Preview.objects.get().status, JournalEntry.objects.filter(action="proposal_previewed").count()) == (
        "running", 0)
    assert finish_preview(preview, worker="w1", now=later, status="failed", reason="exit_code_3", outcome="BAD",
                          summary="s", exit_code=3, stdout="out", detail="d", data={"k": 1}) is True
    row = Preview.objects.get()
    assert (row.status, row.reason, row.outcome, row.exit_code, row.finished_at) == (
        "failed", "exit_code_3", "BAD", 3, later)
    entry = JournalEntry.objects.get(action="proposal_previewed")
    assert (entry.actor, entry.at, entry.proposal_id, entry.event_id) == ("system", later, proposal.pk, proposal.event_id)
    assert entry.data == {
        "status": "failed", "reason": "exit_code_3", "outcome": "BAD", "summary": "s", "exitCode": 3,
        "durationSeconds": 1.234, "requestedBy": None, "registryDigest": row.registry_digest,
    }
    assert finish_preview(preview, worker="w1", now=later, status="done") is False


def test_a_request_after_a_finished_preview_starts_it_afresh(registry_files, approver):
    """Asking again for a finished preview clears what its last run found: the row is pending,
    with no start, end, deadline, worker, result or output, and the registry in force's digest."""
    many_loops(registry_files, 1)
    (proposal,) = proposals()
    preview = claim_preview(worker="w1", clock=lambda: NOW)
    finish_preview(preview, worker="w1", now=NOW, status="failed", reason="exit_code_3", outcome="BAD",
                   summary="s", exit_code=3, stdout="out", detail="d", data={"k": 1})
    Preview.objects.update(registry_digest="old", argv=["old"], timeout_seconds=1)
    again = request_preview(proposal.pk, user=approver, now=at("2026-11-30T21:08:05Z"), registry=store.current())
    assert again.pk == preview.pk
    row = Preview.objects.values(
        "status", "reason", "detail", "argv", "timeout_seconds", "requested_at", "requested_by", "started_at",
        "finished_at", "deadline_at", "worker", "outcome", "summary", "data", "stdout", "exit_code",
        "registry_digest").get()
    assert row == {
        "status": "pending", "reason": "", "detail": "", "argv": proposal.plan["argv"][:-1], "timeout_seconds": 60,
        "requested_at": at("2026-11-30T21:08:05Z"), "requested_by": approver.pk, "started_at": None,
        "finished_at": None, "deadline_at": None, "worker": "", "outcome": "", "summary": "", "data": None,
        "stdout": "", "exit_code": None, "registry_digest": store.current().digest,
    }
    assert JournalEntry.objects.get(action="proposal_preview_requested").data == {"via": "admin"}


def test_planning_queues_the_newest_proposal_of_a_loop_and_drops_only_planning_s_older_rows(
        registry_files, settings, approver):
    """Of one loop's proposals only the newest is queued, in whatever order they come; a newer
    proposal drops its loop's waiting preview that planning asked for (``newer_proposal``), never
    one a person asked for, and the dropped row leaves room in the queue."""
    settings.FACTORY_PREVIEW_QUEUE = 4
    many_loops(registry_files, 4)
    settings.FACTORY_PREVIEW_QUEUE = 3
    a, b, c, d = proposals()
    Preview.objects.filter(proposal__in=[b, d]).delete()
    Preview.objects.filter(proposal=c).update(requested_by=approver)
    registry = store.current()
    later = at("2026-11-30T21:09:00Z")
    assert queue_previews([(b.pk, a.loop, a.loop_key, b.plan), (d.pk, c.loop, c.loop_key, d.plan)],
                          registry=registry, now=later) == 2
    rows = dict(Preview.objects.values_list("proposal_id", "status"))
    assert rows == {a.pk: "not-previewed", b.pk: "pending", c.pk: "pending", d.pk: "pending"}
    dropped = Preview.objects.get(proposal=a)
    assert (dropped.reason, dropped.finished_at, dropped.detail) == (
        "newer_proposal", later, "a newer proposal of this loop is previewed instead")

    Preview.objects.filter(proposal__in=[a, b, d]).delete()
    assert queue_previews([(d.pk, "g", None, d.plan), (b.pk, "g", None, b.plan)], registry=registry, now=later) == 1
    assert queue_previews([(a.pk, "h", None, a.plan), (b.pk, "h", None, b.plan)], registry=registry, now=later) == 1
    assert set(Preview.objects.values_list("proposal_id", flat=True)) == {b.pk, c.pk, d.pk}


def test_loop_less_proposals_each_get_a_preview_within_the_room_left(registry_files, settings, approver):
    """Proposals without a loop are not grouped; the queue takes the newest first up to the room
    left by the previews already waiting."""
    settings.FACTORY_PREVIEW_QUEUE = 3
    many_loops(registry_files, 3)
    a, b, c = proposals()
    Preview.objects.exclude(proposal=c).delete()
    registry = store.current()
    assert queue_previews([(a.pk, None, None, a.plan), (b.pk, None, None, b.plan)], registry=registry, now=NOW) == 2
    assert set(Preview.objects.values_list("proposal_id", flat=True)) == {a.pk, b.pk, c.pk}
    Preview.objects.filter(proposal__in=[a, b]).delete()
    settings.FACTORY_PREVIEW_QUEUE = 2
    assert queue_previews([(a.pk, None, None, a.plan), (b.pk, None, None, b.plan)], registry=registry, now=NOW) == 1
    assert set(Preview.objects.values_list("proposal_id", flat=True)) == {b.pk, c.pk}
    assert queue_previews([(a.pk, None, None, {**a.plan, "definition": "heartbeat@1"})], registry=registry,
                          now=NOW) == 0
    assert queue_previews([(a.pk, None, None, {**a.plan, "definition": "nothing@1"})], registry=registry,
                          now=NOW) == 0


def test_each_preview_lost_with_its_worker_is_failed_and_journaled_on_its_own(registry_files, approver):
    """Two running previews past their deadlines: each is failed ``worker_lost`` with the reason
    in words and journaled once; a row already finished, or still within its deadline, is left
    alone; asking again for a running preview is refused, saying its status."""
    from runtime.services.previews import PreviewRefused, _record_lost

    many_loops(registry_files, 2)
    first, second = proposals()
    claim_preview(worker="gone:1", clock=lambda: NOW)
    claim_preview(worker="gone:2", clock=lambda: NOW)
    with pytest.raises(PreviewRefused) as running:
        request_preview(first.pk, user=approver, now=NOW, registry=store.current())
    assert (running.value.code, running.value.detail) == ("preview_in_progress", f"proposal {first.pk}'s preview is running")
    lost = at("2026-11-30T21:09:16Z")
    assert claim_preview(worker="w", clock=lambda: lost) is None
    detail = "its worker stopped answering before the preview ended (it died, and the command with it)"
    assert sorted(Preview.objects.values_list("proposal_id", "status", "reason", "detail", "finished_at")) == [
        (first.pk, "failed", "worker_lost", detail, lost), (second.pk, "failed", "worker_lost", detail, lost)]
    assert sorted(JournalEntry.objects.filter(action="proposal_previewed").values_list("proposal_id", "data__reason")) == [
        (first.pk, "worker_lost"), (second.pk, "worker_lost")]

    Preview.objects.filter(proposal=first).update(status="done", reason="", finished_at=None)
    Preview.objects.filter(proposal=second).update(status="running", reason="", deadline_at=at("2026-11-30T21:20:00Z"))
    for preview in Preview.objects.all():
        _record_lost(preview.pk, at("2026-11-30T21:10:00Z"))
    assert sorted(Preview.objects.values_list("proposal_id", "status", "reason")) == [
        (first.pk, "done", ""), (second.pk, "running", "")]
    assert JournalEntry.objects.filter(action="proposal_previewed").count() == 2


def test_a_request_is_refused_saying_who_lacks_the_right_and_which_proposal_is_missing(registry_files, approver, viewer):
    """No user is "nobody"; a user without the approve permission is named; a missing proposal
    is named; a proposal whose definition the registry in force lacks has no preview."""
    from types import SimpleNamespace

    from runtime.services.previews import PreviewRefused

    many_loops(registry_files, 1)
    (proposal,) = proposals()
    registry = store.current()
    refusals = []
    for user, proposal_id, given in ((None, proposal.pk, registry), (viewer, proposal.pk, registry),
                                     (approver, 10**6, registry),
                                     (approver, proposal.pk, SimpleNamespace(definitions={}, digest="x"))):
        with pytest.raises(PreviewRefused) as refused:
            request_preview(proposal_id, user=user, now=NOW, registry=given)
        refusals.append((refused.value.code, refused.value.detail))
    assert refusals == [
        ("permission_denied", "nobody lacks the approve_proposal permission"),
        ("permission_denied", "victor lacks the approve_proposal permission"),
        ("not_found", "there is no proposal 1000000"),
        ("no_preview", f"{proposal.definition} declares no preview in the registry in force"),
    ]


def test_a_request_for_the_demos_stand_in_reads_its_script_against_the_registry_in_force(
        registry_files, approver, monkeypatch):
    """A ``fake`` plan's preview is asked of the script with the registry's definitions."""
    from runtime.services import previews

    many_loops(registry_files, 1)
    (proposal,) = proposals()
    Preview.objects.all().delete()
    Proposal.objects.filter(pk=proposal.pk).update(plan={**proposal.plan, "adapter": "fake"})
    registry = store.current()
    asked = []
    monkeypatch.setattr(previews, "scripted_preview", lambda plan, definitions: asked.append(definitions) or {})
    assert request_preview(proposal.pk, user=approver, now=NOW, registry=registry).argv == []
    assert asked == [registry.definitions]
