"""Refusals on the operator's pages are pages in the operator's layout (templates/403.html,
404.html, 500.html); the API and the doors keep answering JSON (factory_site.requests)."""

import pytest
from django.contrib.auth.models import Group
from django.test import Client, RequestFactory

from factory_site.requests import server_error
from runtime.models import Proposal, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_viewer(viewer):
    viewer.groups.add(Group.objects.get(name="Viewers"))
    return viewer


@pytest.fixture
def team_approver(django_user_model):
    user = django_user_model.objects.create_user("bea", password="bea-pass-123", is_staff=True)
    user.groups.add(Group.objects.get(name="Approvers"))
    return user


def test_a_viewers_forged_decision_gets_the_styled_403_page(client, team_viewer, team_approver, proposals):
    client.force_login(team_viewer)
    response = client.post(f"/admin/runtime/proposal/{proposals[1].pk}/decide/approve/", {"confirm": "yes"})
    assert response.status_code == 403
    assert response["Content-Type"] == "text/html; charset=utf-8"
    page = response.content.decode()
    assert "<h1>Not allowed (403)</h1>" in page
    assert '<div id="site-name"><a href="/dashboard/">Factory event runtime</a></div>' in page
    assert "Your account, <strong>victor</strong>, may not do this." in page
    assert "<p>Ask bea to decide it, or to give you a role (<code>manage.py team add</code>).</p>" in page
    assert 'id="logout-form"' in page
    assert (Run.objects.count(), set(Proposal.objects.values_list("status", flat=True))) == (0, {"pending"})


def test_a_form_without_its_csrf_token_gets_the_styled_403_page(approver, proposals):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    response = client.post(f"/admin/runtime/proposal/{proposals[1].pk}/decide/approve/", {"confirm": "yes"})
    assert response.status_code == 403
    page = response.content.decode()
    assert "<h1>Not allowed (403)</h1>" in page
    assert ("<p>The form was refused: it came without this session's security token (CSRF cookie not set.). "
            "Reload the page, then send it again.</p>") in page
    assert Run.objects.count() == 0


def test_an_unknown_operator_page_is_the_styled_404_page(client, team_viewer):
    client.force_login(team_viewer)
    response = client.get("/admin/runtime/proposal/999999/decide/maybe/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Not found (404)</h1>" in page
    assert "There is nothing at <code>/admin/runtime/proposal/999999/decide/maybe/</code>" in page
    anonymous = Client().get("/no-such-page/")
    assert anonymous.status_code == 404 and "<h1>Not found (404)</h1>" in anonymous.content.decode()


def test_the_500_page_needs_no_request_context_and_no_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        response = server_error(RequestFactory().get("/admin/"))
    page = response.content.decode()
    assert response.status_code == 500
    assert "<title>Server error | Factory runtime</title>" in page
    assert "<h1>Server error (500)</h1>" in page
    assert 'href="/static/admin/css/base.css"' in page


@pytest.mark.urls("tests.http.error_urls")
def test_a_failing_operator_page_answers_the_styled_500_and_the_api_json():
    client = Client(raise_request_exception=False)
    page = client.get("/boom/")
    assert page.status_code == 500 and "<h1>Server error (500)</h1>" in page.content.decode()
    api = client.get("/api/boom", HTTP_X_REQUEST_ID="req-1")
    assert (api.status_code, api.json()) == (500, {
        "error": "internal_error",
        "detail": "the server failed to answer this request; its log has the cause under this requestId",
        "requestId": "req-1",
    })


def test_the_api_and_the_doors_keep_answering_json(client, team_viewer, proposals):
    client.force_login(team_viewer)
    refused = client.post(f"/api/proposals/{proposals[1].pk}/approve", {}, content_type="application/json")
    assert refused.status_code == 403 and refused["Content-Type"] == "application/json"
    assert refused.json()["error"] == "permission_denied"
    unknown = client.get("/api/no-such-route")
    assert unknown.status_code == 404 and unknown["Content-Type"] == "application/json"
    door = Client().post("/events/", data=b"{}", content_type="application/json")
    assert door.status_code == 404 and door["Content-Type"] == "application/json"


def test_the_403_handler_answers_json_on_an_api_route():
    from django.core.exceptions import PermissionDenied

    from factory_site.requests import permission_denied

    response = permission_denied(RequestFactory().get("/api/proposals"), PermissionDenied())
    assert (response.status_code, response["Content-Type"]) == (403, "application/json")
    assert response.content == b'{"error": "permission_denied", "detail": "you may not do this"}'
