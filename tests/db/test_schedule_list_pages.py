"""``schedule list`` a page at a time: text 50 loops a page with a line saying how many more;
``--json`` whole unless a page is asked for (docs/schedules.md, "Paging")."""

import json
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import at
from tests.helpers import many_loops

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]


def run(*args) -> str:
    out = StringIO()
    with time_machine.travel(at("2026-11-30T21:08:00Z"), tick=False):
        call_command("schedule", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def loops_120(registry_files):
    many_loops(registry_files, 120)


def rows(text: str) -> list[str]:
    """The loop names of a listing's table (the header and the closing line left out)."""
    return [line.split()[0] for line in text.splitlines()[1:] if line.startswith("loop-")]


def test_the_text_shows_the_first_fifty_and_says_how_many_more(loops_120):
    text = run("list")
    assert rows(text) == [f"loop-{i:04d}" for i in range(50)]
    assert text.splitlines()[-1] == "loops 1-50 of 120, problems first; 70 more: schedule list --page 2"
    assert run() == text


def test_the_last_page_says_which_loops_it_shows(loops_120):
    text = run("list", "--page", "3")
    assert rows(text) == [f"loop-{i:04d}" for i in range(100, 120)]
    assert text.splitlines()[-1] == "loops 101-120 of 120, problems first"


def test_a_page_size_is_carried_into_the_next_command(loops_120):
    text = run("list", "--page", "2", "--page-size", "30")
    assert rows(text) == [f"loop-{i:04d}" for i in range(30, 60)]
    assert text.splitlines()[-1] == "loops 31-60 of 120, problems first; 60 more: schedule list --page 3 --page-size 30"


def test_a_listing_that_fits_on_one_page_has_no_closing_line(registry_files):
    many_loops(registry_files, 3)
    lines = run("list").splitlines()
    assert (len(lines), lines[-1].split()[0]) == (4, "loop-0002")


def test_json_is_every_loop_unless_a_page_is_asked_for(loops_120):
    assert len(json.loads(run("list", "--json"))) == 120
    page = json.loads(run("list", "--json", "--page", "2", "--page-size", "7"))
    assert (page["count"], page["page"], page["pageSize"]) == (120, 2, 7)
    assert [item["name"] for item in page["results"]] == [f"loop-{i:04d}" for i in range(7, 14)]
    assert page["results"] == json.loads(run("list", "--json"))[7:14]


def test_a_page_past_the_last_is_refused_with_exit_2(loops_120):
    with pytest.raises(CommandError, match=r"^there is no page 4: 120 loop\(s\) make 3 page\(s\) of 50$") as caught:
        run("list", "--page", "4")
    assert caught.value.returncode == 2


@pytest.mark.parametrize(("args", "message"), [
    (("--page", "0"), "argument --page: a whole number from 1 to 1000000000, not '0'"),
    (("--page", "x"), "argument --page: a whole number from 1 to 1000000000, not 'x'"),
    (("--page-size", "501"), "argument --page-size: a whole number from 1 to 500, not '501'"),
    (("--page-size", "-5"), "argument --page-size: a whole number from 1 to 500, not '-5'"),
])
def test_a_bad_page_or_size_is_refused(registry_files, args, message):
    with pytest.raises(CommandError) as caught:
        run("list", *args)
    assert str(caught.value) == f"Error: {message}"
