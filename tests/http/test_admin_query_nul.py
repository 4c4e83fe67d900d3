"""A NUL in a query string is 400 on every page and both databases (ops.query_nul, docs/web.md).

On PostgreSQL the admin's list filters passed ``?loop=%00`` to the database, which cannot hold
U+0000 in text: ``DataError`` and a 500, where SQLite answered 200."""

import pytest

from runtime.models import Proposal
from tests.helpers import tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NUL_URLS = [
    "/admin/runtime/proposal/?loop=%00",
    "/admin/runtime/run/?loop=%00",
    "/admin/runtime/event/?loop=%00",
    "/admin/runtime/event/?type=%00",
    "/admin/runtime/proposal/?status__exact=%00",
    "/admin/runtime/run/?status__exact=%00",
    "/admin/runtime/journalentry/?action=%00",
    "/admin/runtime/proposal/?q=%00",
    "/admin/runtime/proposal/?loop=re%00aper&status__exact=pending",
    "/admin/runtime/proposal/?%00=x",
]


@pytest.fixture
def proposals(registry_files):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    return list(Proposal.objects.order_by("id"))


@pytest.mark.parametrize("url", NUL_URLS)
def test_a_nul_in_an_admin_query_is_a_400(client, approver, proposals, url):
    client.force_login(approver)
    response = client.get(url)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_a_normal_admin_filter_still_answers(client, approver, proposals):
    client.force_login(approver)
    response = client.get("/admin/runtime/proposal/?loop=reaper&status__exact=pending")
    assert response.status_code == 200
    assert [p.pk for p in response.context["cl"].result_list] == [proposals[0].pk]
    assert client.get("/admin/runtime/event/?type=factory.clock.tick").status_code == 200
    assert client.get("/admin/runtime/journalentry/?action=proposal.created").status_code == 200


def test_a_nul_in_a_json_routes_query_is_a_json_400(client):
    response = client.get("/schedules?page=%00")
    assert (response.status_code, response.json()) == (400, {
        "error": "bad_request", "detail": "the request was refused before reaching the route (NulInQueryString)"})


def test_the_approval_api_keeps_its_own_refusal_for_a_nul_filter(client, settings):
    settings.FACTORY_API_TOKEN = "a-long-random-shared-token"
    response = client.get("/api/events?loop=%00", headers={"Authorization": "Bearer a-long-random-shared-token"})
    assert (response.status_code, response.json()["error"]) == (400, "invalid_filter")
