"""Running a loop once now (schedules.triggering; docs/schedules.md, "Running a loop once now")."""

from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command

from ops.earning_evidence import gather
from runtime.models import Door, Event, JournalEntry, Proposal, Run, RunStatus
from runtime.registry import store
from runtime.services.admission import AdmissionRefused, admit_event
from runtime.services.approval import ApprovalRefused, approve_proposal, older_pending, superseded_by
from schedules.pausing import pause_loop
from schedules.triggering import TriggerRefused, trigger_loop
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, finish_active_runs, tick

pytestmark = pytest.mark.django_db

REAPER_ON = "schedules:\n  reaper:\n    enabled: true\n"
REQUEST = "0123456789abcdef"


@pytest.fixture
def controller(django_user_model):
    user = django_user_model.objects.create_user("carol", password="carol-pass-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=("control_loop", "approve_proposal")))
    return user


def trigger(user, instant, loop="reaper", **options):
    options.setdefault("request_id", REQUEST)
    return trigger_loop(loop, registry=store.current(), user=user, now=at(instant), via="cli", **options)


def journal(action):
    return [(e.actor, e.actor_name, e.data) for e in JournalEntry.objects.filter(action=action).order_by("id")]


def refusal(user, instant, loop="reaper", **options):
    with pytest.raises(TriggerRefused) as caught:
        trigger(user, instant, loop, **options)
    return caught.value.code, caught.value.status, caught.value.detail


def test_a_trigger_admits_the_current_slots_tick_payload_through_the_operator_door_and_proposes(registry_files, controller):
    registry_files.write_config("schedule.yaml", REAPER_ON)
    done = trigger(controller, "2026-12-06T09:41:30Z", note="fixed the claims dir")
    event = Event.objects.get(uid="manual:reaper:0123456789abcdef")
    assert (event.door, event.source, event.type, event.loop, event.slot) == (
        "operator", "operator", "clock.tick.reaper", None, None)
    assert event.payload == {
        "loop": "reaper", "slot": "2026-12-06T09:00:00Z", "cadenceSeconds": 3600, "skippedSlots": 0,
        **{k: v for k, v in store.current().loops["reaper"].payload.items()},
    }
    assert (done.duplicate, done.outcome, done.reason) == (False, "PROPOSED", "")
    proposal = Proposal.objects.get(event=event)
    assert done.proposal.pk == proposal.pk
    # The proposal is the loop's (its lists, filters and counts find it), as its tick's would be.
    assert (proposal.status, proposal.loop, proposal.loop_key, proposal.catch_up, proposal.singleton_key,
            proposal.idempotency_key) == ("pending", "reaper", None, "none", "reaper", "eventId:manual:reaper:0123456789abcdef")
    assert journal("loop_triggered") == [("operator", "carol", {
        "loop": "reaper", "eventId": "manual:reaper:0123456789abcdef", "via": "cli", "note": "fixed the claims dir",
    })]
    admitted = JournalEntry.objects.get(action="event_admitted", event=event)
    assert (admitted.actor, admitted.actor_name, admitted.data["door"]) == ("operator", "carol", "operator")


def test_a_trigger_of_an_auto_loop_is_a_proposal_and_holds_the_loops_singleton(registry_files, controller):
    tick("2026-12-06T09:40:05Z")
    finish_active_runs()
    done = trigger(controller, "2026-12-06T09:41:30Z", loop="heartbeat")
    assert (done.outcome, done.proposal.status, done.proposal.actor) == ("PROPOSED", "pending", "")
    assert Run.objects.filter(event=done.event).count() == 0
    run = approve_proposal(done.proposal.pk, user=controller, now=at("2026-12-06T09:42:00Z"), via="cli")
    assert (run.singleton_key, run.lane, run.approved_by_id) == ("heartbeat", "door:operator", controller.pk)
    # The loop's own slot still fires (its key is its slot, not the trigger's eventId), and
    # finds the triggered run in flight.
    tick("2026-12-06T09:45:05Z")
    slot = Event.objects.get(uid="clock:heartbeat:2026-12-06T09:45:00Z")
    assert (slot.planning_outcome, slot.planning_reason) == ("NOOP", "previous_run_in_flight")


def test_a_trigger_while_a_run_of_the_singleton_loop_is_in_flight_is_refused_and_admits_nothing(registry_files, controller):
    tick("2026-12-06T09:40:05Z")
    running = Run.objects.get(status=RunStatus.QUEUED)
    assert refusal(controller, "2026-12-06T09:41:30Z", loop="heartbeat") == (
        "previous_run_in_flight", 409, f"heartbeat is a singleton loop and run {running.pk} is queued")
    Run.objects.filter(pk=running.pk).update(status=RunStatus.INTERRUPTED)
    assert refusal(controller, "2026-12-06T09:41:31Z", loop="heartbeat") == (
        "previous_run_in_flight", 409,
        f"heartbeat is a singleton loop and run {running.pk} is interrupted: retry or close it first")
    assert Event.objects.filter(door=Door.OPERATOR).count() == 0
    assert journal("loop_triggered") == []


def test_a_pending_triggered_proposal_is_refused_approval_while_a_tick_run_is_in_flight(registry_files, controller):
    done = trigger(controller, "2026-12-06T09:41:30Z", loop="heartbeat")
    tick("2026-12-06T09:45:05Z")
    assert Run.objects.filter(status=RunStatus.QUEUED, lane="loop:heartbeat").count() == 1
    with pytest.raises(ApprovalRefused) as caught:
        approve_proposal(done.proposal.pk, user=controller, now=at("2026-12-06T09:45:10Z"), via="cli")
    assert caught.value.code == "previous_run_in_flight"


def test_the_same_request_id_twice_admits_one_event_and_answers_with_its_proposal(registry_files, controller):
    registry_files.write_config("schedule.yaml", REAPER_ON)
    first = trigger(controller, "2026-12-06T09:41:30Z")
    again = trigger(controller, "2026-12-06T09:41:31Z")
    assert (again.duplicate, again.event.pk, again.proposal.pk, again.outcome) == (
        True, first.event.pk, first.proposal.pk, "PROPOSED")
    assert Event.objects.filter(door=Door.OPERATOR).count() == 1
    assert len(journal("loop_triggered")) == 1
    other = trigger(controller, "2026-12-06T09:41:32Z", request_id="fedcba9876543210")
    assert other.event.uid == "manual:reaper:fedcba9876543210"
    # The same id with another note is another request, not a retry: refused, not dropped.
    with pytest.raises(TriggerRefused) as caught:
        trigger(controller, "2026-12-06T09:41:33Z", note="a different reason")
    assert (caught.value.code, caught.value.detail) == (
        "request_id_reused", "the request id of manual:reaper:0123456789abcdef was used with another note")
    assert Proposal.objects.filter(event__door=Door.OPERATOR, status="pending").count() == 2


def test_refusals_say_why_and_admit_nothing(registry_files, controller, django_user_model):
    assert refusal(controller, "2026-12-06T09:41:30Z") == (
        "loop_disabled", 409, "reaper is disabled in the registry: enable it in a reviewed change first")
    assert refusal(controller, "2026-12-06T09:41:30Z", loop="nope") == (
        "unknown_loop", 404, "no loop named 'nope' in the registry in force")
    assert refusal(controller, "2026-12-06T09:41:30Z", loop="heartbeat", key="acme") == (
        "key_not_allowed", 400, "heartbeat is not a keyed loop: it takes no key")
    assert refusal(controller, "2026-12-06T09:41:30Z", loop="heartbeat", request_id="short") == (
        "invalid_request_id", 400, "a request id is 8 to 64 characters: letters, digits, - and _")
    assert refusal(controller, "2026-12-06T09:41:30Z", loop="heartbeat", note="a\x00b")[0] == "invalid_note"
    viewer = django_user_model.objects.create_user("vic", is_staff=True)
    assert refusal(viewer, "2026-12-06T09:41:30Z", loop="heartbeat") == (
        "permission_denied", 403, "vic lacks the control_loop permission")
    pause_loop("heartbeat", registry=store.current(), user=controller, note="noisy", until=None,
               now=at("2026-12-06T09:40:00Z"), via="cli")
    assert refusal(controller, "2026-12-06T09:41:30Z", loop="heartbeat") == (
        "loop_paused", 409, "heartbeat is paused by carol (noisy): resume it first")
    assert Event.objects.filter(door=Door.OPERATOR).count() == 0
    assert journal("loop_triggered") == []


def test_a_keyed_loop_is_triggered_for_one_of_its_keys(registry_files, controller):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    choose("acme", "09:00", "Europe/Budapest", "2026-12-06T07:00:00Z")
    tick("2026-12-06T07:00:05Z")
    assert refusal(controller, "2026-12-06T07:01:00Z", loop="customer-digest") == (
        "key_required", 400, "customer-digest is a keyed loop: name the key to run")
    assert refusal(controller, "2026-12-06T07:01:00Z", loop="customer-digest", key="globex") == (
        "unknown_key", 404, "customer-digest has no key 'globex'")
    done = trigger(controller, "2026-12-06T07:01:00.250Z", loop="customer-digest", key="acme")
    assert done.event.payload["key"] == "acme"
    assert done.event.payload["slot"] == "2026-12-06T07:01:00Z"
    assert (done.event.subject, done.proposal.singleton_key, done.outcome) == ("acme", "customer-digest acme", "PROPOSED")
    assert (done.proposal.loop, done.proposal.loop_key) == ("customer-digest", "acme")
    with pytest.raises(TriggerRefused) as caught:
        trigger(controller, "2026-12-06T07:02:00Z", loop="customer-digest", key="other-key")
    assert (caught.value.code, caught.value.detail) == (
        "request_id_reused", f"the request id of {done.event.uid} was used with the key 'acme', not with the key 'other-key'")
    with pytest.raises(TriggerRefused) as caught:
        trigger(controller, "2026-12-06T07:02:00Z", loop="customer-digest", key=None)
    assert (caught.value.code, caught.value.detail) == (
        "request_id_reused", f"the request id of {done.event.uid} was used with the key 'acme', not with no key")


def test_no_other_door_may_admit_a_manual_event_id(registry_files):
    envelope = {
        "schemaVersion": "factory.event/v1", "eventId": "Manual:heartbeat:0123456789abcdef", "type": "clock.tick.heartbeat",
        "source": "someone", "subject": "heartbeat", "occurredAt": "2026-12-06T09:40:00Z",
        "correlationId": "c-1", "payload": {"loop": "heartbeat", "slot": "2026-12-06T09:40:00Z", "cadenceSeconds": 300,
                                             "skippedSlots": 0},
    }
    with pytest.raises(AdmissionRefused) as caught:
        admit_event(envelope, door=Door.INJECT, now=at("2026-12-06T09:41:00Z"))
    assert caught.value.as_errors() == [{
        "code": "reserved_event_id", "detail": "eventIds starting with 'manual:' belong to the operator door",
    }]


def test_schedule_trigger_prints_the_proposal_to_decide_and_exits_2_when_refused(registry_files, controller):
    registry_files.write_config("schedule.yaml", REAPER_ON)
    out = StringIO()
    call_command("schedule", "trigger", "reaper", "--as", "carol", "--request-id", REQUEST, "--note", "by hand", stdout=out)
    proposal = Proposal.objects.get(event__uid="manual:reaper:0123456789abcdef")
    assert out.getvalue().strip() == (
        f"triggered reaper: admitted manual:reaper:0123456789abcdef; proposal {proposal.pk} is pending: "
        f"decide it with `approve {proposal.pk} --as carol`")
    out = StringIO()
    call_command("schedule", "trigger", "reaper", "--as", "carol", "--request-id", REQUEST, "--note", "by hand", "--json",
                 stdout=out)
    assert out.getvalue().strip() == (
        '{"loop":"reaper","eventId":"manual:reaper:0123456789abcdef","duplicate":true,'
        f'"planning":{{"outcome":"PROPOSED","reason":""}},"proposal":{proposal.pk}}}')
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("schedule", "trigger", "nope", "--as", "carol", stderr=err)
    assert exited.value.code == 2
    assert err.getvalue().strip() == "refused: unknown_loop: no loop named 'nope' in the registry in force"


def test_a_triggered_proposal_is_the_loops_supersedes_as_a_ticks_does_and_is_no_earning_evidence(registry_files, controller):
    registry_files.write_config("schedule.yaml", REAPER_ON)
    tick("2026-12-06T09:00:05Z")
    done = trigger(controller, "2026-12-06T09:30:00Z")
    tick("2026-12-06T10:00:05Z")
    first, second = Proposal.objects.filter(loop="reaper", event__door=Door.SCHEDULE).order_by("id")
    assert list(Proposal.objects.filter(loop="reaper", status="pending").order_by("id").values_list("pk", flat=True)) == [
        first.pk, done.proposal.pk, second.pk]
    # Running the loop once now covers the older stale slot, as approving a newer tick would.
    run = approve_proposal(done.proposal.pk, user=controller, now=at("2026-12-06T10:01:00Z"), via="cli")
    statuses = dict(Proposal.objects.values_list("pk", "status"))
    assert (statuses[first.pk], statuses[done.proposal.pk], statuses[second.pk]) == ("superseded", "approved", "pending")
    assert (run.loop, run.lane, superseded_by(done.proposal)) == ("reaper", "door:operator", [first.pk])
    finish_active_runs()
    facts = gather(["reaper"], since=at("2026-12-06T08:00:00Z"), now=at("2026-12-06T11:00:00Z"))["reaper"]
    assert sum(facts.runs.values()) == 0
    # And a newer tick's approval supersedes an older pending run once now.
    again = trigger(controller, "2026-12-06T10:30:00Z", request_id="fedcba9876543210")
    tick("2026-12-06T11:00:05Z")
    newest = Proposal.objects.filter(loop="reaper", event__door=Door.SCHEDULE).order_by("-id").first()
    assert list(older_pending(newest).order_by("id").values_list("pk", flat=True)) == [second.pk, again.proposal.pk]


def test_a_triggered_run_is_the_loops_last_run_in_the_overview(registry_files, controller):
    from schedules.overview import schedules_overview

    registry_files.write_config("schedule.yaml", REAPER_ON)
    tick("2026-12-06T09:00:05Z")
    tick_proposal = Proposal.objects.get(loop="reaper", event__door=Door.SCHEDULE)
    approve_proposal(tick_proposal.pk, user=controller, now=at("2026-12-06T09:01:00Z"), via="cli")
    finish_active_runs()
    done = trigger(controller, "2026-12-06T09:30:00Z")
    run = approve_proposal(done.proposal.pk, user=controller, now=at("2026-12-06T09:31:00Z"), via="cli")
    (view,) = schedules_overview(store.current(), now=at("2026-12-06T09:32:00Z"), names=["reaper"])
    last = view.as_json()["lastRun"]
    assert (last["id"], last["status"], last["ofLastTick"]) == (run.pk, "queued", False)
