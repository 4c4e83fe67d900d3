"""``GET /schedules?page=&pageSize=``: one page of the loops by name, as the approval API pages
(docs/schedules.md, "Paging")."""

import pytest
import time_machine

from tests.conftest import at
from tests.helpers import many_loops

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

TOKEN = "a-long-random-api-token"


@pytest.fixture
def get(client, settings, registry_files):
    """GET a path with the API token, seven loops (``loop-0000`` … ``loop-0006``) declared."""
    settings.FACTORY_API_TOKEN = TOKEN
    many_loops(registry_files, 7)

    def answer(path: str):
        with time_machine.travel(at("2026-11-30T21:08:00Z"), tick=False):
            return client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
    return answer


def names(body: dict) -> list[str]:
    return [item["name"] for item in body["results"]]


def test_a_page_holds_its_loops_by_name_with_the_count_and_links(get):
    body = get("/schedules?page=2&pageSize=3").json()
    assert (body["count"], names(body)) == (7, ["loop-0003", "loop-0004", "loop-0005"])
    assert body["next"] == "http://testserver/schedules?page=3&pageSize=3"
    assert body["previous"] == "http://testserver/schedules?pageSize=3"
    last = get("/schedules?page=3&pageSize=3").json()
    assert (names(last), last["next"], last["previous"]) == (
        ["loop-0006"], None, "http://testserver/schedules?page=2&pageSize=3",
    )


def test_a_page_item_is_the_whole_listing_item(get):
    whole = get("/schedules").json()
    assert get("/schedules?page=1&pageSize=2").json()["results"] == whole[:2]


def test_a_page_size_alone_starts_at_page_one_and_a_page_alone_has_fifty(get):
    first = get("/schedules?pageSize=4").json()
    assert (names(first), first["previous"]) == (["loop-0000", "loop-0001", "loop-0002", "loop-0003"], None)
    assert first["next"] == "http://testserver/schedules?page=2&pageSize=4"
    alone = get("/schedules?page=1").json()
    assert (alone["count"], len(alone["results"]), alone["next"], alone["previous"]) == (7, 7, None, None)


def test_without_paging_the_answer_is_every_loop_as_before(get):
    body = get("/schedules").json()
    assert isinstance(body, list) and [item["name"] for item in body] == [f"loop-{i:04d}" for i in range(7)]


@pytest.mark.parametrize(("query", "detail"), [
    ("page=0", "?page= is a whole number from 1 to 1000000000, not '0'"),
    ("page=-1", "?page= is a whole number from 1 to 1000000000, not '-1'"),
    ("page=two", "?page= is a whole number from 1 to 1000000000, not 'two'"),
    ("page=", "?page= is a whole number from 1 to 1000000000, not ''"),
    ("page=1.0", "?page= is a whole number from 1 to 1000000000, not '1.0'"),
    ("page=%C2%B2", "?page= is a whole number from 1 to 1000000000, not '²'"),
    ("page=" + "9" * 5000, "?page= is a whole number from 1 to 1000000000, not '" + "9" * 40 + "'"),
    ("pageSize=0", "?pageSize= is a whole number from 1 to 500, not '0'"),
    ("pageSize=501", "?pageSize= is a whole number from 1 to 500, not '501'"),
    ("page=1&pageSize=%2050", "?pageSize= is a whole number from 1 to 500, not ' 50'"),
])
def test_a_bad_paging_parameter_is_400_naming_it(get, query, detail):
    response = get(f"/schedules?{query}")
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_parameter", "detail": detail}


def test_a_page_past_the_last_is_404(get):
    response = get("/schedules?page=4&pageSize=3")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "there is no page 4: 7 loop(s) make 3 page(s) of 3"}


@pytest.mark.parametrize("count", [60, 600])
def test_a_page_costs_the_same_queries_for_60_and_600_loops(client, settings, registry_files,
                                                            django_assert_num_queries, count):
    settings.FACTORY_API_TOKEN = TOKEN
    many_loops(registry_files, count)
    with django_assert_num_queries(5):
        body = client.get("/schedules?page=2", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert (body["count"], names(body)[0], len(body["results"])) == (count, "loop-0050", 10 if count == 60 else 50)
