"""A page of due keyed rows is admitted together and advanced by compare and swap (docs/design.md §6)."""

from unittest import mock

import pytest

from runtime.models import Event
from schedules.keyed import Row, firing
from schedules.models import KeyedSchedule
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, tick

pytestmark = pytest.mark.django_db


def test_a_page_of_due_rows_is_admitted_in_page_order_and_a_row_changed_meanwhile_keeps_its_change(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    for customer in ("ann", "bob", "cid"):
        choose(customer, "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")  # the rows exist, due at 08:00Z

    real = firing.advance_rows

    def a_setting_event_first(advances):
        # bob's row is replaced (by another slot loop applying a new time) after the page was fetched
        KeyedSchedule.objects.filter(key="bob").update(set_by="crm-new", next_due=at("2026-11-30T09:00:00Z"))
        return real(advances)

    with mock.patch.object(firing, "advance_rows", a_setting_event_first):
        report = tick("2026-11-30T08:00:01Z")
    slot = "2026-11-30T08:00:00Z"
    expected = [f"clock:customer-digest:{c}:{slot}" for c in ("ann", "bob", "cid")]
    assert [t.event_id for t in report.ticks] == expected
    assert list(Event.objects.filter(loop="customer-digest").order_by("id").values_list("uid", flat=True)) == expected
    rows = {r.key: Row.of(r) for r in KeyedSchedule.objects.all()}
    assert {k: (r.next_due, r.last_slot, r.set_by) for k, r in rows.items()} == {
        "ann": (at("2026-12-01T08:00:00Z"), at(slot), rows["ann"].set_by),
        "bob": (at("2026-11-30T09:00:00Z"), None, "crm-new"),  # its change stands
        "cid": (at("2026-12-01T08:00:00Z"), at(slot), rows["cid"].set_by),
    }
    assert rows["ann"].last_event_id == expected[0] and rows["ann"].last_tick_at == at("2026-11-30T08:00:01Z")
