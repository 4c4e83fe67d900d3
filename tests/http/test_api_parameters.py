"""The list routes' query parameters: a value or a name they cannot take is 400
``invalid_parameter`` naming it, never ignored (docs/api.md, "Routes"; ops.paging)."""

import pytest

from tests.helpers import tick

pytestmark = pytest.mark.django_db

SHARED = "a-long-random-shared-token"
HEADERS = {"Authorization": f"Bearer {SHARED}"}
LISTS = {
    "/api/events": "?type=, ?loop=, ?page=, ?pageSize=",
    "/api/proposals": "?status=, ?loop=, ?page=, ?pageSize=",
    "/api/runs": "?status=, ?loop=, ?page=, ?pageSize=",
    "/schedules": "?page=, ?pageSize=",
}


@pytest.fixture
def listed(registry_files, settings):
    """A heartbeat tick: one event, and its auto-approved run."""
    settings.FACTORY_API_TOKEN = SHARED
    tick("2026-11-30T21:00:10Z")


def answer(client, path: str) -> tuple[int, dict]:
    response = client.get(path, headers=HEADERS)
    return response.status_code, response.json()


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("query", ["limit=abc", "limit=10", "offset=5", "page_size=10", "cursor=x", "per_page=2"])
def test_a_parameter_the_list_does_not_take_is_400_naming_it(client, listed, path, query):
    name = query.split("=")[0]
    assert answer(client, f"{path}?{query}") == (400, {
        "error": "invalid_parameter", "detail": f"?{name}= is not a parameter of {path}: it takes {LISTS[path]}",
    })


@pytest.mark.parametrize("path", LISTS)
def test_a_parameter_given_twice_is_400_as_only_one_would_count(client, listed, path):
    assert answer(client, f"{path}?pageSize=1&pageSize=2") == (400, {
        "error": "invalid_parameter", "detail": "?pageSize= is given 2 times: give it once",
    })


@pytest.mark.parametrize("query", ["status=queued&status=failed", "loop=heartbeat&loop=reaper"])
def test_a_filter_given_twice_is_400(client, listed, query):
    name = query.split("=")[0]
    assert answer(client, f"/api/runs?{query}") == (400, {
        "error": "invalid_parameter", "detail": f"?{name}= is given 2 times: give it once",
    })


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize(("query", "detail"), [
    ("pageSize=%D9%A1%D9%A2", "?pageSize= is a whole number from 1 to 500, not '١٢'"),
    ("page=%D9%A1", "?page= is a whole number from 1 to 1000000000, not '١'"),
    ("pageSize=-1", "?pageSize= is a whole number from 1 to 500, not '-1'"),
    ("pageSize=0", "?pageSize= is a whole number from 1 to 500, not '0'"),
    ("page=10000000000", "?page= is a whole number from 1 to 1000000000, not '10000000000'"),
    ("page=" + "9" * 400, "?page= is a whole number from 1 to 1000000000, not '" + "9" * 40 + "'"),
])
def test_a_paging_value_out_of_its_range_is_400_on_every_list(client, listed, path, query, detail):
    assert answer(client, f"{path}?{query}") == (400, {"error": "invalid_parameter", "detail": detail})


@pytest.mark.parametrize("path", LISTS)
def test_the_parameters_a_list_takes_still_answer_200(client, listed, path):
    assert client.get(f"{path}?page=1&pageSize=1&format=json", headers=HEADERS).status_code == 200


@pytest.mark.parametrize("path", LISTS)
def test_credentials_are_asked_for_before_the_parameters(client, listed, path):
    assert client.get(f"{path}?limit=abc").status_code == 401
