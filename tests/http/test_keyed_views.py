"""A keyed loop as ``schedule show``, ``schedule next`` and GET /schedules tell it: its keys, the soonest due (docs/design.md §6)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from runtime.registry import get_registry
from schedules.overview import schedules_overview
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, tick

pytestmark = pytest.mark.django_db


def test_show_next_and_get_schedules_give_the_counts(registry_files, client, settings):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    choose("bob", "07:30", "Asia/Kolkata", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    (view,) = schedules_overview(get_registry(), now=at("2026-11-30T06:11:00Z"), names=["customer-digest"])
    assert view.as_json()["keyed"] == {
        "setBy": ["customer.digest-time.chosen"], "clearedBy": ["customer.unsubscribed"], "keys": 2,
        "nextDue": "2026-11-30T08:00:00Z",
    }
    assert (view.as_json()["every"], view.as_json()["nextSlotDue"], view.stopped) == (None, "2026-11-30T08:00:00Z", False)
    settings.FACTORY_API_TOKEN = "token-for-keyed"
    answer = client.get("/schedules", HTTP_AUTHORIZATION="Bearer token-for-keyed")
    (item,) = [i for i in answer.json() if i["name"] == "customer-digest"]
    assert item["keyed"]["keys"] == 2
    out = StringIO()
    call_command("schedule", "show", "customer-digest", "--json", stdout=out)
    document = json.loads(out.getvalue())
    assert [d["key"] for d in document["dueKeys"]] == ["alice", "bob"]
    text = StringIO()
    call_command("schedule", "next", "customer-digest", "-n", "1", stdout=text)
    assert text.getvalue().splitlines()[:2] == [
        "2 key(s) in customer-digest; due soonest:", "  2026-11-30T08:00:00Z  alice  (09:00 Europe/Budapest)",
    ]
