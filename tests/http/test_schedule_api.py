"""``GET /schedules`` and ``GET /status``: auth, and the same data as the commands (docs/design.md §10)."""

import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from tests.conftest import at
from tests.helpers import many_loops, tick

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

TOKEN = "a-long-random-api-token"
ROUTES = ["/schedules", "/status"]


@pytest.fixture
def token(settings):
    settings.FACTORY_API_TOKEN = TOKEN
    return TOKEN


@pytest.mark.parametrize("route", ROUTES)
def test_anonymous_is_401(client, token, route):
    response = client.get(route)
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert response.json()["detail"]


@pytest.mark.parametrize("route", ROUTES)
def test_the_token_is_200(client, token, route):
    assert client.get(route, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.parametrize("route", ROUTES)
def test_a_wrong_token_is_401(client, token, route):
    response = client.get(route, headers={"Authorization": "Bearer not-the-token"})
    assert response.status_code == 401
    assert response.json()["error"] == "authentication_failed"


@pytest.mark.parametrize("route", ROUTES)
def test_an_unset_token_refuses_every_bearer(client, settings, route):
    settings.FACTORY_API_TOKEN = ""
    for header in ("Bearer ", "Bearer x", "Bearer"):
        response = client.get(route, headers={"Authorization": header})
        assert response.status_code == 401, header
        assert set(response.json()) == {"error", "detail"}


@pytest.mark.parametrize("route", ROUTES)
def test_a_staff_session_is_200(client, viewer, route):
    client.force_login(viewer)
    assert client.get(route).status_code == 200


@pytest.mark.parametrize("route", ROUTES)
def test_a_signed_in_non_staff_user_is_403(client, outsider, route):
    client.force_login(outsider)
    response = client.get(route)
    assert response.status_code == 403
    assert response.json()["error"] == "permission_denied"


def test_schedules_answers_what_schedule_list_json_prints(client, token, registry_files):
    tick("2026-11-30T21:07:00Z")
    with time_machine.travel(at("2026-11-30T21:08:00Z"), tick=False):
        response = client.get("/schedules", headers={"Authorization": f"Bearer {TOKEN}"})
        out = StringIO()
        call_command("schedule", "list", "--json", stdout=out)
    assert response.json() == json.loads(out.getvalue())
    assert [item["name"] for item in response.json()] == ["customer-digest", "heartbeat", "reaper"]


def test_status_answers_what_doctor_prints(client, token, registry_files):
    tick("2026-11-30T21:07:00Z")
    with time_machine.travel(at("2026-11-30T21:08:00Z"), tick=False):
        response = client.get("/status", headers={"Authorization": f"Bearer {TOKEN}"})
        out = StringIO()
        with pytest.raises(SystemExit):
            call_command("doctor", stdout=out)
    assert response.status_code == 200
    assert response.json() == json.loads(out.getvalue())


@pytest.mark.parametrize("count", [1, 500])
def test_get_schedules_costs_constant_queries(client, token, registry_files, django_assert_num_queries, count):
    many_loops(registry_files, count)
    with django_assert_num_queries(5):
        response = client.get("/schedules", headers={"Authorization": f"Bearer {TOKEN}"})
    assert len(response.json()) == count


@pytest.mark.parametrize("count", [1, 500])
def test_get_status_costs_constant_queries(client, token, registry_files, django_assert_num_queries, count):
    many_loops(registry_files, count)
    # Four for the loops and runs (the due states, the pile-ups, the slot loop's row, the run
    # counts), seven for the runs', loops' and clocks' findings (one more, for stuckLoops, when a
    # loop's last tick found its run in flight: tests/db/test_doctor_findings.py), one for the
    # long pauses, one for the tick emitter lease (the processes' emitsTicks).
    with django_assert_num_queries(13):
        response = client.get("/status", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.json()["runs"] == {"queued": 0, "running": 0}


@pytest.mark.parametrize("route", ROUTES)
def test_a_persons_token_is_refused_with_where_it_belongs(client, settings, route):
    from ops.api.tokens import TOKEN_PREFIX
    from ops.auth import PERSONAL_PREFIX

    assert PERSONAL_PREFIX == TOKEN_PREFIX.encode()
    hint = "; a person's token (fct_…) is for the /api/ routes: read this one signed in or with FACTORY_API_TOKEN"
    settings.FACTORY_API_TOKEN = ""
    answer = client.get(route, headers={"Authorization": "Bearer fct_abcdefgh12345678"})
    assert (answer.status_code, answer.json()["detail"]) == (401, "bearer tokens are refused: FACTORY_API_TOKEN is not set" + hint)
    settings.FACTORY_API_TOKEN = TOKEN
    answer = client.get(route, headers={"Authorization": "Bearer fct_abcdefgh12345678"})
    assert (answer.status_code, answer.json()["detail"]) == (401, "the bearer token is not FACTORY_API_TOKEN" + hint)
