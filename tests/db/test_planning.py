"""Planning and approval (docs/design.md §7; spec §5, §6, §10 exit criteria 2 and 3)."""

import json

import pytest
from django.core.management import call_command

from runtime.models import Door, Event, JournalEntry, Proposal, Run
from runtime.services.admission import admit_event
from runtime.services.approval import ApprovalRefused, approve_proposal, reject_proposal
from runtime.services.planning import plan_pending
from tests.conftest import at
from tests.helpers import PREVIEW_WAITING, finish_active_runs, tick

pytestmark = pytest.mark.django_db

PROBE = {
    "id": "probe", "version": 1, "adapter": "command", "command": ["{python}", "-c", "print('probe')"],
    "output_contract": "factory.command-result/v1", "mutating": False, "timeoutSeconds": 30, "maxAttempts": 1,
}
WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


def envelope(event_id, type_, payload, **extra):
    return {
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": type_, "source": "operator",
        "subject": "test", "occurredAt": "2026-11-30T10:00:00Z", "correlationId": event_id, "payload": payload, **extra,
    }


def test_a_watched_loop_proposes_once_per_slot_and_runs_nothing_until_approved(registry_files, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    for instant in ("2026-11-30T21:00:10Z", "2026-11-30T21:30:00Z", "2026-11-30T22:00:10Z", "2026-11-30T23:00:10Z"):
        tick(instant)
    proposals = list(Proposal.objects.order_by("id"))
    assert [(p.idempotency_key, p.status) for p in proposals] == [
        ("reaper:2026-11-30T21:00:00Z", "pending"),
        ("reaper:2026-11-30T22:00:00Z", "pending"),
        ("reaper:2026-11-30T23:00:00Z", "pending"),
    ]
    assert Run.objects.count() == 0
    plan = proposals[0].plan
    assert plan["definition"] == "reaper@1"
    assert plan["argv"][-1] == "--apply" and plan["mutating"] is True
    assert plan["registryDigest"] == proposals[0].registry_digest

    run = approve_proposal(proposals[2].pk, user=approver, now=at("2026-11-30T23:05:00Z"), via="admin")
    assert (run.actor, run.approved_by, run.status, run.idempotency_key) == (
        "operator", approver, "queued", "reaper:2026-11-30T23:00:00Z"
    )
    assert [p.status for p in Proposal.objects.order_by("id")] == ["superseded", "superseded", "approved"]
    approved = Proposal.objects.get(pk=proposals[2].pk)
    assert (approved.actor, approved.decided_by, approved.decided_at) == ("operator", approver, at("2026-11-30T23:05:00Z"))
    entry = JournalEntry.objects.get(action="proposal_approved")
    assert (entry.actor, entry.actor_name, entry.data) == ("operator", "alice", {"via": "admin", "preview": PREVIEW_WAITING})
    assert JournalEntry.objects.filter(action="proposal_superseded").count() == 2


def test_an_auto_loop_runs_as_schedule_and_nothing_claims_an_operator_approved_it(registry_files):
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    run = Run.objects.get()
    assert (proposal.status, proposal.actor, proposal.decided_by) == ("approved", "schedule", None)
    assert (run.actor, run.approved_by, run.status) == ("schedule", None, "queued")
    assert Event.objects.get().planning_outcome == "APPROVED"
    assert not JournalEntry.objects.filter(actor="operator").exists()
    assert list(JournalEntry.objects.order_by("id").values_list("action", "actor")) == [
        ("event_admitted", "schedule"), ("proposal_auto_approved", "schedule"), ("run_queued", "schedule"),
    ]


def test_a_run_in_flight_makes_the_next_tick_a_noop(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    every: 60m\n")
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    second = Event.objects.get(uid="clock:heartbeat:2026-11-30T22:00:00Z")
    assert (second.planning_outcome, second.planning_reason) == ("NOOP", "previous_run_in_flight")
    assert Run.objects.count() == 1
    assert JournalEntry.objects.get(action="event_noop").data == {"reason": "previous_run_in_flight", "loop": "heartbeat"}
    finish_active_runs()
    tick("2026-11-30T23:00:10Z")
    assert Run.objects.count() == 2


def test_a_pending_proposal_does_not_silence_a_watched_loop(registry_files):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    assert list(Event.objects.order_by("id").values_list("planning_outcome", flat=True)) == ["PROPOSED", "PROPOSED"]


def test_approving_while_a_run_of_the_loop_is_in_flight_is_refused_and_the_proposal_stays_pending(registry_files, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    older, newer = Proposal.objects.order_by("id")
    # Approving the newer one supersedes the older; approve the older first instead.
    approve_proposal(older.pk, user=approver, now=at("2026-11-30T22:01:00Z"))
    with pytest.raises(ApprovalRefused) as refused:
        approve_proposal(newer.pk, user=approver, now=at("2026-11-30T22:02:00Z"))
    assert refused.value.code == "previous_run_in_flight"
    assert Proposal.objects.get(pk=newer.pk).status == "pending"
    assert Run.objects.count() == 1


def test_deciding_needs_the_permission_and_a_pending_proposal(registry_files, approver, viewer):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    with pytest.raises(ApprovalRefused) as refused:
        approve_proposal(proposal.pk, user=viewer, now=at("2026-11-30T21:01:00Z"))
    assert refused.value.code == "permission_denied"
    reject_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:02:00Z"), note="not tonight")
    proposal.refresh_from_db()
    assert (proposal.status, proposal.note, proposal.decided_by) == ("rejected", "not tonight", approver)
    with pytest.raises(ApprovalRefused) as refused:
        approve_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:03:00Z"))
    assert refused.value.code == "not_pending"
    with pytest.raises(ApprovalRefused) as refused:
        approve_proposal(999, user=approver, now=at("2026-11-30T21:03:00Z"))
    assert refused.value.code == "not_found"
    assert Run.objects.count() == 0


def test_each_refused_decision_carries_the_http_status_an_api_answers_it_with(registry_files, approver, viewer):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    refusals = []
    for proposal_id, user in ((proposal.pk, viewer), (999, approver)):
        with pytest.raises(ApprovalRefused) as refused:
            approve_proposal(proposal_id, user=user, now=at("2026-11-30T21:01:00Z"))
        refusals.append((refused.value.code, refused.value.status))
    reject_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:02:00Z"))
    with pytest.raises(ApprovalRefused) as refused:
        reject_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:03:00Z"))
    refusals.append((refused.value.code, refused.value.status))
    assert refusals == [("permission_denied", 403), ("not_found", 404), ("not_pending", 409)]
    assert str(refused.value) == f"not_pending: proposal {proposal.pk} is rejected, not pending"


def test_catch_up_all_proposals_are_not_superseded(registry_files, approver):
    registry_files.write_config(
        "schedule.yaml",
        "schedules:\n  heartbeat:\n    enabled: false\n  sweep:\n    every: 60m\n    eventType: clock.tick.reaper\n"
        "    catchUp: all\n    singleton: false\n    enabled: true\n",
    )
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T23:00:10Z")
    proposals = list(Proposal.objects.order_by("id"))
    assert len(proposals) == 3
    approve_proposal(proposals[-1].pk, user=approver, now=at("2026-11-30T23:01:00Z"))
    assert [p.status for p in Proposal.objects.order_by("id")] == ["pending", "pending", "approved"]


def test_a_tick_claimed_through_another_door_plans_as_watched(registry_files):
    tick_payload = {"loop": "heartbeat", "slot": "2026-11-30T21:00:00Z", "cadenceSeconds": 300, "skippedSlots": 0}
    admit_event(envelope("fake-tick-1", "clock.tick.heartbeat", tick_payload), door=Door.INJECT, now=at("2026-11-30T21:00:01Z"))
    plan_pending(now=at("2026-11-30T21:00:02Z"))
    proposal = Proposal.objects.get()
    assert (proposal.status, proposal.idempotency_key, proposal.loop) == ("pending", "eventId:fake-tick-1", None)
    assert Run.objects.count() == 0


def test_a_duplicate_idempotency_key_is_a_noop(registry_files):
    tick("2026-11-30T21:00:10Z")
    replay = envelope(
        "clock:heartbeat:2026-11-30T21:00:00Z:replay", "clock.tick.heartbeat",
        {"loop": "heartbeat", "slot": "2026-11-30T21:00:00Z", "cadenceSeconds": 300, "skippedSlots": 0},
    )
    admit_event(replay, door=Door.SCHEDULE, now=at("2026-11-30T21:01:00Z"))
    plan_pending(now=at("2026-11-30T21:01:00Z"))
    event = Event.objects.get(uid=replay["eventId"])
    assert (event.planning_outcome, event.planning_reason) == ("NOOP", "duplicate_idempotency_key")
    assert Run.objects.count() == 1


def human_only_registry(registry_files):
    registry_files.write("definitions/probe@1.json", PROBE)

    def change(types):
        types["factory.release.requested"] = {"target": "probe@1", "humanApprovalOnly": True}
        types["factory.scan.requested"] = {"target": "probe@1", "approval": "auto"}
    registry_files.update("event-types.json", change)


def test_human_approval_only_is_always_watched_and_type_auto_applies_to_outside_doors(registry_files):
    human_only_registry(registry_files)
    now = at("2026-11-30T21:00:00Z")
    admit_event(envelope("release-1", "factory.release.requested", {}), door=Door.INJECT, now=now)
    admit_event(envelope("scan-1", "factory.scan.requested", {}), door=Door.INJECT, now=now)
    plan_pending(now=now)
    release = Proposal.objects.get(event__uid="release-1")
    scan = Proposal.objects.get(event__uid="scan-1")
    assert (release.status, release.actor) == ("pending", "")
    assert (scan.status, scan.actor, scan.decided_by) == ("approved", "inject", None)
    assert Run.objects.get().actor == "inject"


def test_an_event_whose_payload_fails_the_input_schema_is_refused_with_a_journal_entry(registry_files):
    def change(types):
        types["factory.raw.requested"] = {"target": "reaper@1"}
    registry_files.update("event-types.json", change)
    admit_event(envelope("raw-1", "factory.raw.requested", {"unexpected": 1}), door=Door.INJECT, now=at("2026-11-30T21:00:00Z"))
    plan_pending(now=at("2026-11-30T21:00:00Z"))
    event = Event.objects.get()
    assert (event.planning_outcome, event.planning_reason) == ("REFUSED", "input_schema_violation")
    assert JournalEntry.objects.get(action="event_refused").data["reason"] == "input_schema_violation"
    assert Proposal.objects.count() == 0


def test_cli_approve_records_the_operator_the_os_user_and_via_cli(registry_files, approver, viewer, capsys):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    with pytest.raises(SystemExit) as exited:
        call_command("approve", str(proposal.pk), "--as", "victor")
    assert exited.value.code == 2
    assert "refused: permission_denied" in capsys.readouterr().err
    call_command("approve", str(proposal.pk), "--as", "alice")
    entry = JournalEntry.objects.get(action="proposal_approved")
    assert (entry.actor, entry.actor_name, entry.data["via"]) == ("operator", "alice", "cli")
    assert entry.data["osUser"]
    with pytest.raises(SystemExit) as exited:
        call_command("reject", str(proposal.pk), "--as", "alice")
    assert exited.value.code == 2
    capsys.readouterr()
    call_command("runs", "--json")
    runs = json.loads(capsys.readouterr().out)
    assert [(r["actor"], r["approvedBy"], r["status"]) for r in runs] == [("operator", "alice", "queued")]


def test_cli_approve_takes_a_note_as_reject_does(registry_files, approver, capsys):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    with pytest.raises(SystemExit) as exited:
        call_command("approve", str(proposal.pk), "--as", "alice", "--note", "x" * 2001)
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == "refused: note_too_long: the note has 2001 characters; at most 2000"
    call_command("approve", str(proposal.pk), "--as", "alice", "--note", "checked the diff")
    entry = JournalEntry.objects.get(action="proposal_approved")
    assert (entry.data["via"], entry.data["note"]) == ("cli", "checked the diff")
    assert Proposal.objects.get(pk=proposal.pk).note == "checked the diff"


def test_cli_approve_says_which_pending_proposals_it_superseded(registry_files, approver, capsys):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    for instant in ("2026-11-30T21:00:10Z", "2026-11-30T22:00:10Z", "2026-11-30T23:00:10Z"):
        tick(instant)
    first, second, newest = Proposal.objects.order_by("id").values_list("pk", flat=True)
    call_command("approve", str(newest), "--as", "alice")
    run = Run.objects.get()
    assert capsys.readouterr().out.strip() == (
        f"approved proposal {newest} as alice: run {run.pk} queued;"
        f" superseded pending proposal(s) {first}, {second} of loop reaper"
    )


def test_cli_approve_of_the_only_pending_proposal_says_only_the_run(registry_files, approver, capsys):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    call_command("approve", str(proposal.pk), "--as", "alice")
    assert capsys.readouterr().out.strip() == f"approved proposal {proposal.pk} as alice: run {Run.objects.get().pk} queued"
