"""Keyed schedules set and cleared by events (docs/design.md §6).

The worked example: ``customer-digest``, set by ``customer.digest-time.chosen`` and
cleared by ``customer.unsubscribed``; each customer's digest is its own run. How the
commands and GET /schedules show a keyed loop is ``http/test_keyed_views.py``; the load
errors of a keyed declaration are ``unit/test_keyed_load_errors.py``.
"""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from runtime.models import Event, JournalEntry, Proposal
from runtime.registry import get_registry
from schedules.keyed import Row
from schedules.models import KeyedSchedule
from schedules.overview import schedules_overview
from tests.conftest import at
from tests.helpers import DIGEST_ON, choose, finish_active_runs, tick, unsubscribe

pytestmark = pytest.mark.django_db

#: A one-time reminder: the key's row fires once, at the instant the event names.
REMINDER = DIGEST_ON + """\
  reminder:
    eventType: customer.digest.due
    catchUp: none
    singleton: true
    enabled: true
    keyed:
      setBy:
        customer.digest-time.chosen: {key: /payload/customer, once: /payload/at}
      clearedBy:
        customer.unsubscribed: {key: /payload/customer}
"""


def rows(loop="customer-digest"):
    return {r.key: Row.of(r) for r in KeyedSchedule.objects.filter(loop=loop)}


def ticks(loop="customer-digest"):
    return list(Event.objects.filter(loop=loop).order_by("id").values_list("uid", flat=True))


def test_a_chosen_time_sets_a_row_and_fires_at_that_local_time(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    set_by = choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    row = rows()["alice"]
    assert (row.rule, row.at, row.timezone, row.next_due, row.set_by, row.last_slot) == (
        "at", "09:00", "Europe/Budapest", at("2026-11-30T08:00:00Z"), set_by, None,
    )
    assert JournalEntry.objects.filter(action="keyed_schedule_set").values_list("data", flat=True).get() == {
        "loop": "customer-digest", "key": "alice", "rule": "09:00 Europe/Budapest", "nextDue": "2026-11-30T08:00:00Z",
    }
    tick("2026-11-30T07:59:59Z")
    assert ticks() == []
    tick("2026-11-30T08:00:01Z")
    assert ticks() == ["clock:customer-digest:alice:2026-11-30T08:00:00Z"]
    event = Event.objects.get(loop="customer-digest")
    assert event.envelope()["payload"] == {
        "loop": "customer-digest", "key": "alice", "slot": "2026-11-30T08:00:00Z", "cadenceSeconds": None, "skippedSlots": 0,
    }
    assert (event.subject, event.loop_key) == ("alice", "alice")
    assert Proposal.objects.get(event=event).idempotency_key == "customer-digest:alice:2026-11-30T08:00:00Z"
    row = rows()["alice"]
    assert (row.next_due, row.last_slot, row.last_event_id) == (
        at("2026-12-01T08:00:00Z"), at("2026-11-30T08:00:00Z"), "clock:customer-digest:alice:2026-11-30T08:00:00Z",
    )


def test_a_thousand_customers_at_nine_are_a_thousand_runs_not_one(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    for n in range(30):
        choose(f"c{n:03d}", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    tick("2026-11-30T08:00:01Z")
    proposals = Proposal.objects.filter(loop="customer-digest")
    assert proposals.count() == 30
    assert {p.loop_key for p in proposals} == {f"c{n:03d}" for n in range(30)}
    assert Event.objects.filter(loop="customer-digest", planning_outcome="PROPOSED").count() == 30


def test_setting_again_replaces_the_row_and_clearing_deletes_it(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    second = choose("alice", "07:30", "Asia/Kolkata", "2026-11-30T06:20:00Z")
    choose("bob", "18:00", "Europe/Budapest", "2026-11-30T06:20:00Z")
    tick("2026-11-30T06:20:01Z")
    assert {k: (r.at, r.timezone, r.next_due, r.set_by) for k, r in rows().items()} == {
        "alice": ("07:30", "Asia/Kolkata", at("2026-12-01T02:00:00Z"), second),
        "bob": ("18:00", "Europe/Budapest", at("2026-11-30T17:00:00Z"), rows()["bob"].set_by),
    }
    unsubscribe("alice", "2026-11-30T06:30:00Z")
    unsubscribe("nobody", "2026-11-30T06:30:00Z")
    tick("2026-11-30T06:30:01Z")
    assert list(rows()) == ["bob"]
    assert [e.data["deleted"] for e in JournalEntry.objects.filter(action="keyed_schedule_cleared").order_by("id")] == [True, False]


def test_a_setting_event_that_does_not_validate_is_refused_and_the_old_row_stays(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    before = rows()
    bad = choose("alice", "25:00", "Europe/Budapset", "2026-11-30T06:20:00Z")
    choose("has space", "09:00", "Europe/Budapest", "2026-11-30T06:20:00Z")
    tick("2026-11-30T06:20:01Z")
    assert rows() == before
    refused = JournalEntry.objects.filter(action="keyed_set_refused").order_by("id")
    assert refused[0].event.uid == bad
    assert refused[0].data == {"loop": "customer-digest", "problems": [
        {"field": "at", "detail": "'25:00' is not a wall time: write HH:MM, 00:00 to 23:59 (e.g. 09:00)"},
        {"field": "timezone", "detail": "'Europe/Budapset' is not an IANA time zone"},
    ]}
    assert refused[1].data["problems"] == [
        {"field": "key", "detail": "'has space' is not a key: 1 to 100 printable characters without spaces"},
    ]


def test_a_once_row_fires_once_is_deleted_and_stays_gone_after_a_rebuild(registry_files):
    registry_files.write_config("schedule.yaml", REMINDER)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "2026-11-30T10:15:30+01:00", "-", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    assert rows("reminder")["alice"].next_due == at("2026-11-30T09:15:30Z")
    tick("2026-11-30T09:15:31Z")
    tick("2026-11-30T09:20:00Z")
    assert ticks("reminder") == ["clock:reminder:alice:2026-11-30T09:15:30Z"]
    assert rows("reminder") == {}
    call_command("schedule", "rebuild", "reminder", stdout=StringIO())
    assert rows("reminder") == {}


def test_rebuild_gives_the_rows_it_had(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    for n, (wall, zone) in enumerate([("09:00", "Europe/Budapest"), ("07:30", "Asia/Kolkata"), ("23:45", "America/New_York")]):
        choose(f"c{n}", wall, zone, "2026-11-30T06:10:00Z")
    choose("c9", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    unsubscribe("c9", "2026-11-30T06:11:00Z")
    tick("2026-11-30T06:11:01Z")
    for instant in ("2026-11-30T08:00:01Z", "2026-12-01T02:00:01Z", "2026-12-01T05:00:00Z", "2026-12-03T09:00:00Z"):
        tick(instant)
        finish_active_runs()
    choose("c1", "10:00", "Europe/Budapest", "2026-12-03T09:05:00Z")
    tick("2026-12-03T09:05:01Z")
    before = rows()
    assert before["c0"].last_slot == at("2026-12-03T08:00:00Z")
    out = StringIO()
    call_command("schedule", "rebuild", "customer-digest", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"loop": "customer-digest", "keys": 3, "events": Event.objects.filter(
        type__in=["customer.digest-time.chosen", "customer.unsubscribed"]).count() + len(ticks())}
    assert rows() == before
    assert JournalEntry.objects.filter(action="keyed_schedule_rebuilt").count() == 1
    # Nothing is applied twice after a rebuild.
    tick("2026-12-03T09:05:02Z")
    assert rows() == before


def test_rebuild_refuses_a_loop_that_is_not_keyed(registry_files):
    with pytest.raises(CommandError) as raised:
        call_command("schedule", "rebuild", "heartbeat", stdout=StringIO())
    assert raised.value.returncode == 2
    assert str(raised.value) == "loop heartbeat is not keyed: it has no rows to rebuild"


def test_downtime_catch_up_per_key(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T08:00:01Z")
    finish_active_runs()
    tick("2026-12-03T12:00:00Z")  # down from 11-30 08:00 to 12-03 12:00
    assert ticks() == ["clock:customer-digest:alice:2026-11-30T08:00:00Z", "clock:customer-digest:alice:2026-12-03T08:00:00Z"]
    assert Event.objects.get(uid=ticks()[-1]).payload["skippedSlots"] == 2


def test_a_row_overdue_for_a_minute_is_a_stopped_loop(registry_files):
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    tick("2026-11-30T06:00:00Z")
    choose("alice", "09:00", "Europe/Budapest", "2026-11-30T06:10:00Z")
    tick("2026-11-30T06:10:01Z")
    (on_time,) = schedules_overview(get_registry(), now=at("2026-11-30T08:01:00Z"), names=["customer-digest"])
    (late,) = schedules_overview(get_registry(), now=at("2026-11-30T08:01:01Z"), names=["customer-digest"])
    assert (on_time.stopped, late.stopped) == (False, True)




# --- the property: rows are a fold of the events ---------------------------------------------------
CUSTOMERS = ["ann", "ben", "cy"]
_examples = iter(range(10**6))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(CUSTOMERS), st.sampled_from(["09:00", "02:30", "23:59", "99:00"]),
                  st.sampled_from(["Europe/Budapest", "Asia/Kolkata", "Mars/Olympus"])),
        st.tuples(st.just("clear"), st.sampled_from(CUSTOMERS)),
        st.tuples(st.just("wait"), st.integers(min_value=1, max_value=60)),
    ),
    max_size=12,
)


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
def test_rows_equal_a_straightforward_fold_of_the_set_and_clear_events(registry_files, ops):
    from datetime import timedelta

    from lib.calendar import time_of_day

    # Each example has its own customers: the journal keeps the earlier examples' events.
    prefix = f"x{next(_examples)}-"
    registry_files.write_config("schedule.yaml", DIGEST_ON)
    now = at("2026-03-28T00:00:00Z")
    tick("2026-03-28T00:00:00Z")
    expected: dict[str, tuple] = {}
    for op in ops:
        now += timedelta(minutes=7)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        if op[0] == "set":
            _, customer, wall, zone = op
            customer = prefix + customer
            choose(customer, wall, zone, stamp)
            valid = wall != "99:00" and zone in ("Europe/Budapest", "Asia/Kolkata")
            if valid:
                expected[customer] = (wall, zone, time_of_day(wall, zone).ceil(now))
        elif op[0] == "clear":
            unsubscribe(prefix + op[1], stamp)
            expected.pop(prefix + op[1], None)
        else:
            now += timedelta(hours=op[1])
        tick(now.strftime("%Y-%m-%dT%H:%M:%SZ"))
        # What fired advanced each row past every slot up to now.
        for customer, (wall, zone, due) in list(expected.items()):
            rule = time_of_day(wall, zone)
            while due <= now:
                due = rule.after(due)
            expected[customer] = (wall, zone, due)
        mine = {k: (r.at, r.timezone, r.next_due) for k, r in rows().items() if k.startswith(prefix)}
        assert mine == expected
    # Only this example's rows: each example starts back in time, in the earlier examples' past
    # (a clock step, which the slot loop repairs in their rows and a replay of events does not).
    before = {k: r for k, r in rows().items() if k.startswith(prefix)}
    call_command("schedule", "rebuild", "customer-digest", stdout=StringIO())
    assert {k: r for k, r in rows().items() if k.startswith(prefix)} == before
