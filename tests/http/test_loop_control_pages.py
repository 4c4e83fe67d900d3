"""Pausing, resuming and running a loop from the pages (ops.web.loop_control; docs/web.md)."""

import html
import re

import pytest
import time_machine
from django.contrib.auth.models import Permission

from runtime.models import Event, JournalEntry, Proposal
from schedules.models import LoopPause, SlotLoopStatus
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = "2026-11-30T23:30:00Z"
BOTH_ON = "schedules:\n  reaper:\n    enabled: true\n"


@pytest.fixture
def pinned(host_clock_as_database_clock, registry_files):
    registry_files.write_config("schedule.yaml", BOTH_ON)
    SlotLoopStatus.objects.create(name="slot-loop", last_iteration_at=at(NOW), pid=1, host="test")
    with time_machine.travel(at(NOW), tick=False):
        yield


@pytest.fixture
def controller(django_user_model):
    user = django_user_model.objects.create_user("carol", password="carol-pass-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=("control_loop", "approve_proposal")))
    return user


@pytest.fixture
def runner(django_user_model):
    """May control loops, may not approve."""
    user = django_user_model.objects.create_user("ron", password="ron-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="control_loop"))
    return user


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_a_viewer_sees_no_control_and_a_forged_post_is_refused(client, viewer, pinned):
    client.force_login(viewer)
    assert 'id="loop-control"' not in client.get("/loops/reaper/").content.decode()
    assert 'form="loop-control"' not in client.get("/dashboard/").content.decode()
    forged = client.post("/dashboard/pause/", {"loop": "reaper", "note": "x", "until": "", "confirm": "yes"})
    assert forged.status_code == 403
    assert client.post("/loops/reaper/trigger/", {"request_id": "0123456789abcdef"}).status_code == 403
    assert client.post("/dashboard/resume/", {"loop": "reaper"}).status_code == 403
    assert (LoopPause.objects.count(), Event.objects.count()) == (0, 0)


def test_pausing_from_the_loop_page_asks_first_then_pauses_with_the_note(client, controller, pinned):
    client.force_login(controller)
    page = client.get("/loops/reaper/").content.decode()
    assert 'id="pause-form"' in page and "Pause reaper…" in page and "Run reaper once now" in page
    asked = client.post("/dashboard/pause/", {"loop": "reaper", "note": "claims dir moved", "until": "3600",
                                              "next": "/loops/reaper/"})
    body = asked.content.decode()
    assert (asked.status_code, LoopPause.objects.count()) == (200, 0)
    assert "A paused loop fires no slot from the runtime&#x27;s next iteration" in body
    assert ("Meanwhile, events of the loop&#x27;s type from other doors (the bridge, inject, GitHub) are still "
            "admitted and planned as any other door&#x27;s event: watched.") in body
    assert "Loops to pause for 1 hour" in body and ">claims dir moved</textarea>" in body
    done = client.post("/dashboard/pause/", {"loop": "reaper", "note": "claims dir moved", "until": "3600",
                                             "next": "/loops/reaper/", "confirm": "yes"}, follow=True)
    assert done.redirect_chain == [("/loops/reaper/", 302)]
    assert messages_of(done) == ["Paused reaper for 1 hour: no slot fires meanwhile."]
    pause = LoopPause.objects.get(loop="reaper")
    assert (pause.via, pause.note, pause.until, pause.paused_by.username) == (
        "web", "claims dir moved", at("2026-12-01T00:30:00Z"), "carol")
    page = done.content.decode()
    assert 'id="resume-form"' in page and 'id="pause-form"' not in page
    assert re.search(r'value="Run reaper once now" disabled', page)
    entry = JournalEntry.objects.get(action="loop_paused")
    assert (entry.actor_name, entry.data) == ("carol", {
        "loop": "reaper", "note": "claims dir moved", "via": "web", "until": "2026-12-01T00:30:00Z"})


def test_the_dashboard_pauses_and_resumes_the_selected_rows_and_says_what_it_could_not(client, controller, pinned):
    client.force_login(controller)
    client.post("/dashboard/pause/", {"loop": "heartbeat", "note": "first", "until": "", "confirm": "yes"}, follow=True)
    done = client.post("/dashboard/pause/", {"loop": ["heartbeat", "reaper"], "note": "incident 42", "until": "",
                                             "confirm": "yes"}, follow=True)
    assert messages_of(done) == [
        "Did not pause heartbeat: already_paused: heartbeat is already paused",
        "Paused reaper until someone resumes it: no slot fires meanwhile.",
    ]
    row = re.search(r'<tr class="problem" data-loop="reaper">.*?</tr>', done.content.decode(), re.S).group(0)
    assert '<span class="badge badge-paused">paused</span>' in row and "by carol: incident 42" in row
    resumed = client.post("/dashboard/resume/", {"loop": ["heartbeat", "reaper"], "note": "fixed"}, follow=True)
    assert messages_of(resumed) == [
        "Resumed heartbeat: the pause covered 0 slot(s); its current slot fires at the next iteration, with no skips.",
        "Resumed reaper: the pause covered 0 slot(s); its current slot fires at the next iteration, with no skips.",
    ]
    assert LoopPause.objects.count() == 0
    assert [e.data["note"] for e in JournalEntry.objects.filter(action="loop_resumed").order_by("id")] == ["fixed", "fixed"]


def test_a_keyed_loop_says_its_rows_fire_as_its_catch_up_policy_says_before_and_after_its_resume(
    client, controller, pinned, registry_files,
):
    """A keyed loop has no loop-level slots to count: its page and its resume speak of its
    rows (docs/schedules.md, "Pausing a loop")."""
    from tests.helpers import DIGEST_ON

    registry_files.write_config("schedule.yaml", DIGEST_ON + "  reaper:\n    enabled: true\n")
    client.force_login(controller)
    client.post("/dashboard/pause/", {"loop": "customer-digest", "note": "migration", "until": "", "confirm": "yes"})
    page = html.unescape(client.get("/loops/customer-digest/").content.decode())
    assert ("<p>Resuming: each of its keys' rows that came due fires at the next iteration as its catch-up "
            "policy (none) says.</p>") in page
    resumed = client.post("/dashboard/resume/", {"loop": "customer-digest"}, follow=True)
    assert messages_of(resumed) == [
        "Resumed customer-digest: each of its keys' rows that came due fires at the next iteration as its catch-up "
        "policy (none) says.",
    ]
    client.post("/dashboard/pause/", {"loop": "reaper", "note": "migration", "until": "", "confirm": "yes"})
    assert ("<p>Resuming: its current slot fires at the next iteration, with no skips; the slots the pause covered "
            "are not fired.</p>") in html.unescape(client.get("/loops/reaper/").content.decode())


def test_bad_pause_forms_are_refused_and_pause_nothing(client, controller, pinned):
    client.force_login(controller)
    odd = client.post("/dashboard/pause/", {"loop": "reaper", "note": "x", "until": "99", "confirm": "yes"}, follow=True)
    assert odd.redirect_chain == [("/dashboard/", 302)]
    assert messages_of(odd) == ["Nothing was paused: until='99' is not one of the page's choices "
                                "('', '3600', '14400', '86400', '604800': seconds, or empty for no end)."]
    empty = client.post("/dashboard/pause/", {"note": "x", "until": ""}, follow=True)
    assert messages_of(empty) == ["No loop was selected: nothing was paused."]
    blank = client.post("/dashboard/pause/", {"loop": "reaper", "note": "  ", "until": "", "confirm": "yes",
                                              "next": "https://elsewhere.example/"}, follow=True)
    assert blank.redirect_chain == [("/dashboard/", 302)]
    assert messages_of(blank) == ["Did not pause reaper: note_required: a pause needs a note saying why the loop is paused"]
    assert LoopPause.objects.count() == 0


def test_run_once_now_takes_an_approver_to_the_confirmation_and_a_double_post_admits_one_event(client, controller, pinned):
    client.force_login(controller)
    page = client.get("/loops/reaper/").content.decode()
    request_id = re.search(r'name="request_id" value="([0-9a-f]{32})"', page).group(1)
    form = {"request_id": request_id, "note": "after the fix"}
    first = client.post("/loops/reaper/trigger/", form)
    proposal = Proposal.objects.get(event__uid=f"manual:reaper:{request_id}")
    assert (first.status_code, first["Location"]) == (302, f"/admin/runtime/proposal/{proposal.pk}/decide/approve/")
    again = client.post("/loops/reaper/trigger/", form, follow=True)
    assert again.redirect_chain[0] == (f"/admin/runtime/proposal/{proposal.pk}/decide/approve/", 302)
    assert messages_of(again) == [
        f"Triggered reaper: manual:reaper:{request_id} became proposal {proposal.pk}.",
        f"This form was sent before: manual:reaper:{request_id} is its event; nothing new was admitted.",
    ]
    assert "Yes, approve and run" in again.content.decode()
    assert Event.objects.filter(door="operator").count() == 1


def test_run_once_now_takes_a_person_who_may_not_approve_to_the_proposal(client, runner, pinned):
    client.force_login(runner)
    page = client.get("/loops/reaper/").content.decode()
    assert "a person who may approve decides it" in page
    done = client.post("/loops/reaper/trigger/", {"request_id": "abcdefgh12345678"})
    proposal = Proposal.objects.get(event__uid="manual:reaper:abcdefgh12345678")
    assert done["Location"] == f"/admin/runtime/proposal/{proposal.pk}/change/"


def test_run_once_now_refused_says_why_on_the_loop_page(client, controller, pinned):
    client.force_login(controller)
    client.post("/dashboard/pause/", {"loop": "reaper", "note": "hold", "until": "", "confirm": "yes"}, follow=True)
    refused = client.post("/loops/reaper/trigger/", {"request_id": "abcdefgh12345678"}, follow=True)
    assert refused.redirect_chain == [("/loops/reaper/", 302)]
    assert messages_of(refused) == ["Did not run reaper: loop_paused: reaper is paused by carol (hold): resume it first"]
    assert Event.objects.filter(door="operator").count() == 0
