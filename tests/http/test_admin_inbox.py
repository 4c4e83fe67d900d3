"""The inbox in the Django admin (docs/design.md §10): pending first, confirmed decisions, read-only machine tables."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils.html import escape

from runtime.admin.proposals import NOTHING_MATCHES, NOTHING_WAITING
from runtime.models import JournalEntry, Proposal, Run
from tests.helpers import PREVIEW_WAITING

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:runtime_proposal_changelist")


def test_pending_proposals_come_first(client, approver, proposals, registry_files):
    from runtime.services.approval import reject_proposal
    from tests.conftest import at

    reject_proposal(proposals[1].pk, user=approver, now=at("2026-11-30T22:01:00Z"))
    client.force_login(approver)
    response = client.get(CHANGELIST)
    assert response.status_code == 200
    assert [p.pk for p in response.context["cl"].result_list] == [proposals[0].pk, proposals[1].pk]


@pytest.mark.parametrize("selected", [["abc"], ["1", "-2"], ["", "1"], ["1.5"], ["²"]])
def test_a_selection_naming_a_row_that_is_not_a_number_decides_nothing_and_says_so(client, approver, proposals, selected):
    client.force_login(approver)
    for confirm in ({}, {"confirm": "yes"}):
        response = client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": selected, **confirm},
                               follow=True)
        assert response.status_code == 200
        assert [str(m) for m in response.context["messages"]] == [
            "The selection names a row that is not a number: nothing was done. Select the rows again."]
    assert (Run.objects.count(), Proposal.objects.filter(status="pending").count()) == (0, len(proposals))


def test_approving_in_the_admin_shows_what_will_run_then_records_the_operator(client, approver, proposals):
    client.force_login(approver)
    target = proposals[1]
    confirm = client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": [target.pk]})
    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "reaper.py" in body and "--apply" in body and "Yes, approve and run" in body
    assert Run.objects.count() == 0
    done = client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": [target.pk], "confirm": "yes"})
    assert done.status_code == 302
    run = Run.objects.get()
    assert (run.proposal_id, run.actor, run.approved_by.username) == (target.pk, "operator", "alice")
    entry = JournalEntry.objects.get(action="proposal_approved")
    assert (entry.actor, entry.actor_name, entry.data) == ("operator", "alice", {"via": "admin", "preview": PREVIEW_WAITING})
    assert Proposal.objects.get(pk=proposals[0].pk).status == "superseded"


def test_rejecting_in_the_admin_records_the_note(client, approver, proposals):
    client.force_login(approver)
    client.post(CHANGELIST, {"action": "reject_selected", "_selected_action": [proposals[0].pk], "confirm": "yes", "note": "too soon"})
    rejected = Proposal.objects.get(pk=proposals[0].pk)
    assert (rejected.status, rejected.note, rejected.decided_by.username) == ("rejected", "too soon", "alice")
    assert JournalEntry.objects.get(action="proposal_rejected").data == {"via": "admin", "note": "too soon"}


def test_a_user_without_the_permission_cannot_approve(client, viewer, proposals):
    client.force_login(viewer)
    assert client.get(CHANGELIST).status_code == 200
    response = client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": [proposals[1].pk], "confirm": "yes"})
    assert response.status_code in (200, 302)
    assert Run.objects.count() == 0
    assert set(Proposal.objects.values_list("status", flat=True)) == {"pending"}


def test_a_viewers_proposal_page_says_why_it_has_no_buttons_and_whom_to_ask(
        client, viewer, approver, django_user_model, proposals):
    django_user_model.objects.create_superuser("root", password="root-pass-123")
    gone = django_user_model.objects.create_user("aaron", password="aaron-pass-123", is_staff=True, is_active=False)
    gone.groups.add(Group.objects.get(name="Approvers"))
    bea = django_user_model.objects.create_user("bea", password="bea-pass-123", is_staff=True)
    bea.groups.add(Group.objects.get(name="Approvers"))
    viewer.groups.add(Group.objects.get(name="Viewers"))
    client.force_login(viewer)
    page = client.get(reverse("admin:runtime_proposal_change", args=[proposals[1].pk])).content.decode()
    assert "decide-approve" not in page and "decide-reject" not in page
    assert ("<p class=\"decide-help\" id=\"decide-help\">You may read this proposal but not decide it: approving or "
            "rejecting takes the\napprove permission (the Approvers role). Ask alice, bea, root.</p>") in page
    client.force_login(approver)
    page = client.get(reverse("admin:runtime_proposal_change", args=[proposals[1].pk])).content.decode()
    assert "decide-approve" in page and "decide-help" not in page


def test_a_viewer_is_told_when_no_one_may_decide(client, viewer, proposals):
    client.force_login(viewer)
    page = client.get(reverse("admin:runtime_proposal_change", args=[proposals[1].pk])).content.decode()
    assert ("No one active holds it yet: a superuser adds approvers with "
            "<code>manage.py team add USERNAME --role approver</code>.</p>") in page


def test_a_decided_proposal_explains_nothing_to_a_viewer(client, viewer, approver, proposals):
    client.force_login(approver)
    client.post(reverse("admin:runtime_proposal_decide", args=[proposals[0].pk, "reject"]), {"confirm": "yes"})
    client.force_login(viewer)
    page = client.get(reverse("admin:runtime_proposal_change", args=[proposals[0].pk])).content.decode()
    assert "decide-help" not in page


def test_outsiders_do_not_see_the_inbox(client, outsider, proposals):
    client.force_login(outsider)
    response = client.get(CHANGELIST)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_machine_tables_are_read_only(client, approver, proposals):
    client.force_login(approver)
    entry = JournalEntry.objects.first()
    for name in ("journalentry", "event", "run", "proposal"):
        assert client.get(reverse(f"admin:runtime_{name}_add")).status_code == 403
    page = client.get(reverse("admin:runtime_journalentry_change", args=[entry.pk]))
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert client.post(reverse("admin:runtime_journalentry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    assert JournalEntry.objects.filter(pk=entry.pk).exists()


def test_deciding_a_proposal_that_is_not_pending_says_so(client, approver, proposals):
    client.force_login(approver)
    client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": [proposals[1].pk], "confirm": "yes"})
    again = client.post(
        CHANGELIST, {"action": "approve_selected", "_selected_action": [proposals[1].pk], "confirm": "yes"}, follow=True
    )
    assert "1 selected proposal(s) were not pending and were left alone." in again.content.decode()
    assert Run.objects.count() == 1


def test_the_inbox_has_no_per_loop_filter_links_and_narrows_to_a_loop_by_its_parameter(client, approver, proposals):
    """The sidebar would list every loop (20,000 links at 20,000 loops): the search box and
    ``?loop=`` narrow instead."""
    Proposal.objects.filter(pk=proposals[0].pk).update(loop="another")
    client.force_login(approver)
    page = client.get(CHANGELIST)
    assert page.status_code == 200
    assert "?loop=" not in page.content.decode()
    narrowed = client.get(CHANGELIST, {"loop": "reaper"})
    assert [p.pk for p in narrowed.context["cl"].result_list] == [proposals[1].pk]
    runs = client.get(reverse("admin:runtime_run_changelist"))
    assert runs.status_code == 200 and "?loop=" not in runs.content.decode()


def test_an_empty_inbox_says_what_would_be_there_instead_of_an_action_bar(client, approver, registry_files):
    client.force_login(approver)
    body = client.get("/admin/runtime/proposal/", {"status__exact": "pending"}).content.decode()
    assert f'<p class="inbox-empty" id="inbox-empty">{escape(NOTHING_WAITING)}</p>' in body
    assert "0 of 0 selected" not in body and 'name="action"' not in body


def test_a_filter_that_empties_the_inbox_says_so(client, approver, proposals):
    client.force_login(approver)
    body = client.get("/admin/runtime/proposal/", {"status__exact": "rejected"}).content.decode()
    assert f'<p class="inbox-empty" id="inbox-empty">{escape(NOTHING_MATCHES)}</p>' in body
    assert 'id="inbox-empty"' not in client.get("/admin/runtime/proposal/").content.decode()


def test_approving_both_of_a_loops_pending_proposals_says_the_older_was_superseded_not_refused(client, approver, proposals):
    client.force_login(approver)
    older, newer = proposals
    done = client.post(CHANGELIST, {"action": "approve_selected", "_selected_action": [older.pk, newer.pk],
                                    "confirm": "yes"}, follow=True)
    said = [str(m) for m in done.context["messages"]]
    run = Run.objects.get()
    assert run.proposal_id == newer.pk
    assert said == [
        f"1 proposal(s) approved: <a href='/admin/runtime/run/{run.pk}/change/'>run {run.pk}</a> (proposal {newer.pk}) queued.",
        f"Proposal {older.pk} was superseded by proposal {newer.pk}, as the confirmation said: its slot is covered by that run.",
    ]


def test_select_all_decides_the_filtered_list_through_a_confirmation_that_fits_django_s_field_limit(
    client, approver, registry_files,
):
    """"Select all" over 1,200 pending proposals: the confirmation describes the first 100 and
    counts the rest, and its form carries the choice and the newest proposal it covers instead
    of 1,200 ids, which Django refuses as more than DATA_UPLOAD_MAX_NUMBER_FIELDS (400). A
    proposal arriving after the page is left pending."""
    import re

    from runtime.admin.proposals import CONFIRM_ROWS
    from runtime.registry import get_registry
    from runtime.services.planning import plan_pending
    from tests.conftest import at
    from tests.helpers import inject, many_loops

    many_loops(registry_files, 1200)
    pending = list(Proposal.objects.filter(status="pending").order_by("pk"))
    assert len(pending) == 1200
    client.force_login(approver)
    changelist = CHANGELIST + "?status__exact=pending"
    confirm = client.post(changelist, {"action": "reject_selected", "index": "0", "select_across": "1",
                                       "_selected_action": [p.pk for p in pending[:100]]})
    assert confirm.status_code == 200
    body = confirm.content.decode()
    form = body[body.rindex('<form method="post">'):]
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
    carried = [value for name, value in fields if name == "_selected_action"]
    assert len(carried) == 1 and int(carried[0]) in {p.pk for p in pending}
    assert sorted((name, value) for name, value in fields if name not in ("_selected_action", "csrfmiddlewaretoken")) == [
        ("action", "reject_selected"), ("confirm", "yes"), ("index", "0"), ("select_across", "1"),
        ("through", str(pending[-1].pk)),
    ]
    assert body.count("<h2>Proposal ") == CONFIRM_ROWS == 100
    assert "Reject 1200 proposal(s)?" in body
    assert f"… and 1100 more pending proposal(s), not described here: each is rejected the same way (the list's selection up to proposal {pending[-1].pk};" in body
    inject("late-1", "factory.janitor-scan.requested", {"repo": "factory"}, "2026-11-30T21:07:30Z")
    plan_pending(now=at("2026-11-30T21:07:31Z"), registry=get_registry())
    late = Proposal.objects.get(event__uid="late-1")
    assert late.status == "pending" and late.pk > pending[-1].pk
    done = client.post(changelist, dict(fields), follow=True)
    assert done.status_code == 200
    assert [str(m) for m in done.context["messages"]] == ["1200 proposal(s) rejected."]
    assert Proposal.objects.filter(status="rejected").count() == 1200
    assert Proposal.objects.get(pk=late.pk).status == "pending"


def test_a_select_all_confirmation_without_its_bound_decides_nothing(client, approver, proposals):
    """A "select all" confirmation whose ``through`` is missing or not a number (a page edited or
    cut short) decides nothing and says so: it cannot tell which proposals were shown."""
    client.force_login(approver)
    for through in ({}, {"through": "abc"}, {"through": "-1"}):
        response = client.post(CHANGELIST + "?status__exact=pending", {
            "action": "reject_selected", "index": "0", "select_across": "1", "confirm": "yes",
            "_selected_action": [proposals[0].pk], **through}, follow=True)
        assert [str(m) for m in response.context["messages"]] == [
            "This confirmation does not say which proposals it showed: nothing was decided. Select them again."]
    assert set(Proposal.objects.values_list("status", flat=True)) == {"pending"}
