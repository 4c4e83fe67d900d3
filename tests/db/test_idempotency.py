"""Domain idempotency across doors: one proposal per held key, released on a dead end (docs/design.md §7.2)."""

from datetime import timedelta
from types import SimpleNamespace

import pytest

from runtime.models import Door, Event, JournalEntry, Proposal, Run, RunStatus
from runtime.services.admission import admit_event
from runtime.services.approval import ApprovalRefused, approve_proposal, reject_proposal, superseded_by
from runtime.services.idempotency import held_keys, key_held, release_after_finish, release_idempotency_key
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run, fail_attempt
from tests.conftest import SHA, at
from tests.helpers import finish_active_runs, inject, step, tick

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")
KEY = f"merge-apply:alpha:7:{SHA}"
APPLY = {"repo": "alpha", "prNumber": 7, "headSha": SHA, "evidence": {"prNumber": 7, "headSha": SHA}}


def through_events_door(event_id: str, type_: str, payload: dict):
    return admit_event({
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": type_, "source": "bridge",
        "subject": payload["repo"], "occurredAt": "2026-11-30T10:00:00Z", "correlationId": event_id, "payload": payload,
    }, door=Door.EVENTS, now=NOW)


def planning_of(event_id: str) -> tuple[str, str]:
    event = Event.objects.get(uid=event_id)
    return event.planning_outcome, event.planning_reason


def released(event_id: str) -> list[tuple[str, str, dict]]:
    return [
        (e.action, e.actor, e.data)
        for e in JournalEntry.objects.filter(action="idempotency_key_released", event__uid=event_id)
    ]


def test_the_same_key_through_two_doors_is_one_proposal_and_a_recorded_noop(registry_files):
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    through_events_door("bridge-merge-7", "factory.merge-apply.requested", APPLY)
    assert plan_pending(now=NOW) == 2
    assert (planning_of("op-merge-7"), planning_of("bridge-merge-7")) == (
        ("PROPOSED", ""), ("NOOP", "duplicate_idempotency_key"),
    )
    assert list(Proposal.objects.values_list("event__uid", "idempotency_key", "status")) == [
        ("op-merge-7", KEY, "pending"),
    ]
    noop = JournalEntry.objects.get(action="event_noop")
    assert (noop.event.uid, noop.actor, noop.data) == (
        "bridge-merge-7", "system", {"reason": "duplicate_idempotency_key", "idempotencyKey": KEY},
    )


def test_a_template_is_skipped_when_a_field_is_missing_and_the_event_keeps_its_own_key(registry_files):
    inject("sweep-1", "factory.merge.requested", {"repo": "alpha"})
    inject("sweep-2", "factory.merge.requested", {"repo": "alpha"})
    inject("scoped-1", "factory.merge.requested", {"repo": "alpha", "prNumbers": [7]})
    inject("pinned-1", "factory.merge.requested", {"repo": "alpha", "prNumbers": [7], "headSha": SHA})
    plan_pending(now=NOW)
    assert list(Proposal.objects.order_by("id").values_list("event__uid", "idempotency_key", "status")) == [
        ("sweep-1", "eventId:sweep-1", "approved"),
        ("sweep-2", "eventId:sweep-2", "approved"),
        ("scoped-1", "eventId:scoped-1", "approved"),
        ("pinned-1", f"merge-scan:alpha:7:{SHA}", "approved"),
    ]


def test_an_outside_event_named_like_a_slot_key_does_not_hold_that_slot(registry_files):
    slot_key = "heartbeat:2026-11-30T10:00:00Z"
    inject(slot_key, "factory.merge.requested", {"repo": "alpha"})
    plan_pending(now=NOW)
    tick("2026-11-30T10:00:10Z")
    assert list(Proposal.objects.order_by("id").values_list("event__uid", "idempotency_key")) == [
        (slot_key, f"eventId:{slot_key}"),
        ("clock:heartbeat:2026-11-30T10:00:00Z", slot_key),
    ]
    assert list(Run.objects.order_by("id").values_list("event__uid", "idempotency_key")) == [
        (slot_key, f"eventId:{slot_key}"),
        ("clock:heartbeat:2026-11-30T10:00:00Z", slot_key),
    ]
    assert planning_of("clock:heartbeat:2026-11-30T10:00:00Z") == ("APPROVED", "")


def test_a_tick_keeps_its_loop_and_slot_even_when_its_payload_fills_the_template(repos):
    repos.write_config("schedule.yaml", (
        "schedules:\n  heartbeat:\n    enabled: false\n"
        f"  merge-hello:\n    payload:\n      prNumbers: [7]\n      headSha: {SHA}\n"
    ))
    tick("2026-11-30T10:00:10Z")
    proposal = Proposal.objects.get(loop="merge-hello")
    assert (proposal.idempotency_key, proposal.event.payload["headSha"]) == ("merge-hello:2026-11-30T10:00:00Z", SHA)


def test_a_rejected_proposal_releases_its_key_and_the_next_event_proposes_again(registry_files, approver):
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW)
    first = Proposal.objects.get()
    reject_proposal(first.pk, user=approver, now=NOW + timedelta(minutes=1), note="not yet")
    assert released("op-merge-7") == [
        ("idempotency_key_released", "system", {"idempotencyKey": KEY, "reason": "rejected"}),
    ]
    first.refresh_from_db()
    assert (first.status, first.key_released_at) == ("rejected", NOW + timedelta(minutes=1))

    through_events_door("bridge-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW + timedelta(minutes=2))
    assert planning_of("bridge-merge-7") == ("PROPOSED", "")
    assert list(Proposal.objects.order_by("id").values_list("event__uid", "idempotency_key", "status")) == [
        ("op-merge-7", KEY, "rejected"), ("bridge-merge-7", KEY, "pending"),
    ]
    inject("op-merge-7-again", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW + timedelta(minutes=3))
    assert planning_of("op-merge-7-again") == ("NOOP", "duplicate_idempotency_key")


def test_a_failed_run_releases_its_key_and_the_same_merge_can_be_proposed_and_run_again(fake_agents, approver):
    fake_agents.write_config("fake-outcomes.yaml", (
        "outcomes:\n  merge-apply@1:\n    - results:\n"
        "        - {outcome: FAILED, summary: the merge conflicted, exitCode: 1}\n"
        "        - {outcome: MERGED}\n"
    ))
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    step("2026-11-30T10:00:00Z")
    approve_proposal(Proposal.objects.get().pk, user=approver, now=at("2026-11-30T10:00:30Z"))
    step("2026-11-30T10:01:00Z")
    run = Run.objects.get()
    assert (run.status, run.outcome, run.key_released_at) == ("failed", "FAILED", at("2026-11-30T10:01:00Z"))
    assert released("op-merge-7") == [
        ("idempotency_key_released", "system", {"idempotencyKey": KEY, "reason": "failed"}),
    ]
    actions = list(JournalEntry.objects.filter(event__uid="op-merge-7").order_by("id").values_list("action", flat=True))
    assert actions[-2:] == ["run_failed", "idempotency_key_released"]

    inject("op-merge-7-retry", "factory.merge-apply.requested", APPLY, instant="2026-11-30T10:02:00Z")
    step("2026-11-30T10:02:00Z")
    second = Proposal.objects.get(event__uid="op-merge-7-retry")
    assert (second.idempotency_key, second.status) == (KEY, "pending")
    approve_proposal(second.pk, user=approver, now=at("2026-11-30T10:02:30Z"))
    step("2026-11-30T10:03:00Z")
    assert list(Run.objects.order_by("id").values_list("idempotency_key", "status", "outcome")) == [
        (KEY, "failed", "FAILED"), (KEY, "succeeded", "MERGED"),
    ]
    inject("op-merge-7-late", "factory.merge-apply.requested", APPLY, instant="2026-11-30T10:04:00Z")
    step("2026-11-30T10:04:00Z")
    assert planning_of("op-merge-7-late") == ("NOOP", "duplicate_idempotency_key")


def test_an_abandoned_run_releases_its_key(registry_files, approver):
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW)
    approve_proposal(Proposal.objects.get().pk, user=approver, now=NOW)
    claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    # A mutating run is interrupted, not abandoned, by its own faults (docs/design.md §8): the
    # failed-attempt path with its one attempt spent is what abandons.
    assert fail_attempt(claimed.pk, reason="timeout", now=NOW + timedelta(seconds=61)) == "abandoned"
    run = Run.objects.get()
    assert (run.status, run.reason, run.key_released_at) == ("abandoned", "timeout", NOW + timedelta(seconds=61))
    assert released("op-merge-7") == [
        ("idempotency_key_released", "system", {"idempotencyKey": KEY, "reason": "abandoned"}),
    ]
    through_events_door("bridge-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW + timedelta(minutes=2))
    assert planning_of("bridge-merge-7") == ("PROPOSED", "")


def test_a_superseded_proposal_keeps_its_key(registry_files, approver):
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n")
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    older, newer = Proposal.objects.order_by("id")
    approve_proposal(newer.pk, user=approver, now=at("2026-11-30T22:01:00Z"))
    older.refresh_from_db()
    assert (older.status, older.key_released_at) == ("superseded", None)
    assert not JournalEntry.objects.filter(action="idempotency_key_released").exists()


def test_superseded_by_names_the_proposals_each_approval_superseded_oldest_first(registry_files, approver):
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n")
    for instant in ("2026-11-30T21:00:10Z", "2026-11-30T22:00:10Z", "2026-11-30T23:00:10Z", "2026-12-01T00:00:10Z",
                    "2026-12-01T01:00:10Z"):
        tick(instant)
    first, second, third, fourth, fifth = Proposal.objects.order_by("id")
    approve_proposal(third.pk, user=approver, now=at("2026-12-01T01:01:00Z"))
    finish_active_runs()
    approve_proposal(fifth.pk, user=approver, now=at("2026-12-01T01:02:00Z"))
    assert superseded_by(third) == [first.pk, second.pk]
    assert superseded_by(fifth) == [fourth.pk]
    assert (superseded_by(first), superseded_by(fourth)) == ([], [])
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW)
    assert superseded_by(Proposal.objects.get(event__uid="op-merge-7")) == []


def test_a_filled_key_too_long_for_the_table_is_refused_with_its_length(registry_files):
    registry_files.write("schemas/note.json", {"type": "object", "properties": {"text": {"type": "string"}}})
    registry_files.write("definitions/note@1.json", {
        "id": "note", "version": 1, "adapter": "command", "command": ["{python}", "-c", "print('note')"],
        "output_contract": "factory.command-result/v1", "mutating": False, "inputSchema": "note.json",
        "idempotencyKey": "note:{payload.text}", "timeoutSeconds": 30, "maxAttempts": 1,
    })
    registry_files.update("event-types.json", lambda types: types.__setitem__("note.requested", {"target": "note@1"}))
    inject("note-1", "note.requested", {"text": "x" * 396})
    inject("note-2", "note.requested", {"text": "x" * 395})
    plan_pending(now=NOW)
    assert (planning_of("note-1"), planning_of("note-2")) == (("REFUSED", "idempotency_key_too_long"), ("PROPOSED", ""))
    refused = JournalEntry.objects.get(action="event_refused")
    assert (refused.event.uid, refused.data) == ("note-1", {"reason": "idempotency_key_too_long", "length": 401})
    assert Proposal.objects.get().idempotency_key == "note:" + "x" * 395


def test_a_sweep_tick_that_answers_wait_keeps_its_slot_key(fake_agents):
    fake_agents.write_config("repos.yaml", "repos:\n  - name: hello\n    github: Codertocat/Hello-World\n    base: master\n")
    step("2026-11-30T10:00:10Z")
    step("2026-11-30T10:01:00Z")
    run = Run.objects.get(loop="merge-hello")
    assert (run.status, run.outcome, run.key_released_at) == ("succeeded", "WAIT", None)
    assert not JournalEntry.objects.filter(action="idempotency_key_released").exists()


def test_a_rejection_with_a_note_over_2000_characters_is_refused_and_keeps_the_key(registry_files, approver):
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW)
    proposal = Proposal.objects.get()
    with pytest.raises(ApprovalRefused) as refused:
        reject_proposal(proposal.pk, user=approver, now=NOW, note="y" * 2001)
    assert (refused.value.code, refused.value.status) == ("note_too_long", 400)
    proposal.refresh_from_db()
    assert (proposal.status, proposal.key_released_at) == ("pending", None)


def test_held_keys_names_only_the_keys_a_proposal_still_holds(registry_files, approver):
    inject("op-merge-7", "factory.merge-apply.requested", APPLY)
    plan_pending(now=NOW)
    assert held_keys({KEY, "never:held", "x'y"}) == {KEY}
    reject_proposal(Proposal.objects.get().pk, user=approver, now=NOW + timedelta(minutes=1))
    assert held_keys({KEY}) == set()
    assert held_keys(set()) == set()


# idempotency's own functions, one proposal beside another: which key is held, what a release
# changes (that proposal and its run only, once) and journals, when a finished run releases.

LATER = NOW + timedelta(minutes=5)


def apply(number: int) -> dict:
    return {"repo": "alpha", "prNumber": number, "headSha": SHA, "evidence": {"prNumber": number, "headSha": SHA}}


def key(number: int) -> str:
    return f"merge-apply:alpha:{number}:{SHA}"


@pytest.fixture
def two_runs(registry_files, approver) -> tuple[Proposal, Proposal]:
    """Two approved merge proposals (PR 7 and PR 8), each with its run, both holding their keys."""
    inject("op-merge-7", "factory.merge-apply.requested", apply(7))
    inject("op-merge-8", "factory.merge-apply.requested", apply(8))
    plan_pending(now=NOW)
    first, second = (Proposal.objects.get(event__uid=uid) for uid in ("op-merge-7", "op-merge-8"))
    for proposal in (first, second):
        approve_proposal(proposal.pk, user=approver, now=NOW + timedelta(minutes=1))
    return first, second


def released_at(proposal: Proposal) -> tuple:
    """When the proposal's key and its run's were released (None: held)."""
    proposal.refresh_from_db()
    return proposal.key_released_at, Run.objects.get(proposal=proposal).key_released_at


def releases() -> list[tuple]:
    return list(JournalEntry.objects.filter(action="idempotency_key_released").order_by("id").values_list(
        "proposal__event__uid", "actor", "at", "data"))


def test_a_key_is_held_only_by_a_proposal_that_has_not_released_it(two_runs):
    first, _ = two_runs
    assert (key_held(key(7)), key_held(key(8)), key_held(key(9))) == (True, True, False)
    release_idempotency_key(first, reason="rejected", now=LATER)
    assert (key_held(key(7)), key_held(key(8)), key_held(key(9))) == (False, True, False)


def test_a_release_touches_that_proposal_and_its_run_only_and_is_journaled(two_runs):
    first, second = two_runs
    assert release_idempotency_key(first, reason="abandoned", now=LATER) is True
    assert released_at(first) == (LATER, LATER)
    assert released_at(second) == (None, None)
    assert releases() == [("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "abandoned"})]


def test_a_key_released_already_is_not_released_again(two_runs):
    first, _ = two_runs
    release_idempotency_key(first, reason="failed", now=LATER)
    assert release_idempotency_key(first, reason="closed", now=LATER + timedelta(hours=1)) is False
    assert released_at(first) == (LATER, LATER)
    assert releases() == [("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "failed"})]


def test_a_run_that_released_its_key_keeps_the_instant_it_did(two_runs):
    first, _ = two_runs
    Run.objects.filter(proposal=first).update(key_released_at=NOW)
    assert release_idempotency_key(first, reason="failed", now=LATER) is True
    assert released_at(first) == (LATER, NOW)


def test_an_outcome_is_journaled_with_the_release(two_runs):
    first, _ = two_runs
    assert release_idempotency_key(first, reason="outcome", now=LATER, outcome="WAIT") is True
    assert releases() == [
        ("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "outcome", "outcome": "WAIT"}),
    ]


def test_an_unknown_reason_is_refused_with_the_reasons(two_runs):
    first, _ = two_runs
    with pytest.raises(ValueError) as refused:
        release_idempotency_key(first, reason="bored", now=LATER)
    assert str(refused.value) == "'bored' is not a reason to release a key: rejected, failed, abandoned, closed, outcome"
    assert released_at(first) == (None, None) and releases() == []


def registry_releasing(definition: str, *outcomes: str) -> SimpleNamespace:
    """A registry whose ``definition`` releases its key on ``outcomes``."""
    return SimpleNamespace(definitions={definition: SimpleNamespace(release_key_on=outcomes)})


def test_a_run_that_succeeded_with_an_outcome_its_definition_lists_releases_its_key(two_runs):
    first, second = two_runs
    run = Run.objects.get(proposal=first)
    registry = registry_releasing(run.definition, "WAIT")
    assert release_after_finish(run, RunStatus.SUCCEEDED, "WAIT", now=LATER, registry=registry) is True
    assert release_after_finish(Run.objects.get(proposal=second), RunStatus.SUCCEEDED, "DONE", now=LATER,
                                registry=registry) is False
    assert (released_at(first), released_at(second)) == ((LATER, LATER), (None, None))
    assert releases() == [
        ("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "outcome", "outcome": "WAIT"}),
    ]


def test_a_ticks_run_keeps_its_key_whatever_its_outcome(two_runs):
    first, _ = two_runs
    run = Run.objects.get(proposal=first)
    run.loop = "merge-scan"
    registry = registry_releasing(run.definition, "WAIT")
    assert release_after_finish(run, RunStatus.SUCCEEDED, "WAIT", now=LATER, registry=registry) is False
    assert released_at(first) == (None, None) and releases() == []


def test_a_rejection_records_the_operator_the_instant_and_the_note_and_refuses_a_second(registry_files, approver):
    inject("op-merge-7", "factory.merge-apply.requested", apply(7))
    inject("op-merge-8", "factory.merge-apply.requested", apply(8))
    plan_pending(now=NOW)
    first, second = (Proposal.objects.get(event__uid=uid) for uid in ("op-merge-7", "op-merge-8"))
    assert reject_proposal(first.pk, user=approver, now=LATER).pk == first.pk
    reject_proposal(second.pk, user=approver, now=LATER, note="not this one", via="api", token_label="alice's laptop")
    decided = Proposal.objects.filter(pk__in=[first.pk, second.pk]).order_by("id").values_list(
        "status", "actor", "decided_by__username", "decided_at", "note")
    assert list(decided) == [("rejected", "operator", "alice", LATER, ""), ("rejected", "operator", "alice", LATER, "not this one")]
    assert list(JournalEntry.objects.filter(action="proposal_rejected").order_by("id").values_list(
        "actor", "actor_name", "event_id", "proposal_id", "data")) == [
        ("operator", "alice", first.event_id, first.pk, {"via": "admin"}),
        ("operator", "alice", second.event_id, second.pk,
         {"via": "api", "tokenLabel": "alice's laptop", "note": "not this one"}),
    ]
    with pytest.raises(ApprovalRefused) as refused:
        reject_proposal(first.pk, user=approver, now=LATER + timedelta(minutes=1))
    assert (refused.value.code, refused.value.detail) == ("not_pending", f"proposal {first.pk} is rejected, not pending")
    with pytest.raises(ApprovalRefused) as refused:
        reject_proposal(10**6, user=approver, now=LATER)
    assert (refused.value.code, refused.value.status, refused.value.detail) == ("not_found", 404, "there is no proposal 1000000")
    assert Proposal.objects.get(pk=first.pk).decided_at == LATER
