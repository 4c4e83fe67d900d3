"""Ticks written by the database (``schedules.tick_rows``) store exactly the rows the envelope path
stores: ``admit_batch`` of ``tick_envelope``s and the states' forward-only advance (docs/performance.md,
"Ticks"). Compared row by row, as the database holds them, for interval and time-of-day loops,
catch-up ``none``, ``last`` and ``all``, fresh loops, and payloads and subjects that need escaping."""

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction

from lib.calendar import loop_rule
from lib.instants import format_instant
from runtime.models import Door, Event, JournalEntry
from runtime.registry import get_registry
from runtime.services.admission import admit_batch
from schedules import ticks
from schedules.envelope import tick_envelope
from schedules.models import ScheduleState
from schedules.tick_rows import tick_form, write_ticks
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

#: A payload that needs every kind of escape ``json.dumps`` makes, and keys the tick itself sets.
RICH_PAYLOAD = {"note": "café \"quoted\" \\ back\nslash \u2028 \U0001f600", "slot": "static", "n": [1, 2.5, None, True]}


def varied_loops(registry_files) -> None:
    """Loops of every shape the database path writes: one-minute ``none``, five-minute ``last``
    and ``all`` (both with skipped slots), time of day in a zone, a rich payload and subject."""
    registry_files.write("schemas/rich-tick.json", {"type": "object"})
    registry_files.write("definitions/rich@1.json", {
        "id": "rich", "version": 1, "adapter": "command", "command": ["{python}", "-c", "print('rich')"],
        "output_contract": "factory.command-result/v1", "mutating": False, "inputSchema": "rich-tick.json",
        "timeoutSeconds": 30, "maxAttempts": 1,
    })
    registry_files.update("event-types.json", lambda types: types.__setitem__("test.tick.rich", {"target": "rich@1"}))

    def change(data):
        reaper = {key: value for key, value in data["reaper"].items() if key != "every"}
        data.clear()
        data.update({
            "a-minute": {**reaper, "every": "1m", "enabled": True},
            "b-last": {**reaper, "every": "5m", "catchUp": "last", "enabled": True},
            "c-all": {**reaper, "every": "5m", "catchUp": "all", "singleton": False, "enabled": True},
            "d-paris": {**reaper, "at": "22:10", "timezone": "Europe/Paris", "enabled": True},
            "e-rich": {**reaper, "every": "1m", "eventType": "test.tick.rich", "payload": RICH_PAYLOAD, "enabled": True},
        })
    registry_files.update("schedules.json", change)


EVENT_READ = ("uid", "type", "source", "subject", "occurred_at", "correlation_id", "causation_id", "payload", "door",
              "admitted_at", "loop", "loop_key", "slot", "planned_at", "planning_outcome", "planning_reason")


def stored_rows() -> dict:
    """Every event, journal and state row as the database holds it (JSON as its stored text on
    SQLite), without the generated ids, in id order."""
    def read(sql):
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    payload = "CAST(payload AS TEXT)" if connection.vendor == "sqlite" else "payload"
    data = "CAST(data AS TEXT)" if connection.vendor == "sqlite" else "data"
    columns = ", ".join(payload if c == "payload" else c for c in EVENT_READ)
    return {
        "events": read(f"SELECT {columns} FROM {Event._meta.db_table} ORDER BY id"),
        "journal": read(
            f"SELECT at, action, actor, actor_name, e.uid, {data} FROM {JournalEntry._meta.db_table} j"
            f" LEFT JOIN {Event._meta.db_table} e ON e.id = j.event_id WHERE action = 'event_admitted' ORDER BY j.id"
        ),
        "states": read(
            f"SELECT loop, enabled, enabled_since, last_slot, last_event_id, last_tick_at, next_due"
            f" FROM {ScheduleState._meta.db_table} ORDER BY loop"
        ),
    }


def by_envelopes(due, registry, now) -> None:
    """The reference: the envelope path's rows for ``due`` at ``now`` — ``admit_batch`` of each
    ``tick_envelope``, then each loop's newest slot recorded as its last, only forward."""
    admit_batch([tick_envelope(loop, slot) for loop, slot, _ in due], door=Door.SCHEDULE, now=now,
                registry=registry, validate=False)
    for loop, slot, fresh in due:
        rule = loop_rule(loop)
        state = ScheduleState.objects.get(loop=loop.name)
        if fresh and not state.enabled:
            state.enabled, state.enabled_since = True, now
        if state.last_slot is None or state.last_slot < slot.slot:
            state.last_slot, state.last_event_id = slot.slot, f"clock:{loop.name}:{format_instant(slot.slot)}"
            state.next_due, state.last_tick_at = rule.after(rule.floor(slot.slot)), now
        state.save()


def both_paths(now, *, write_after=None) -> tuple[dict, dict]:
    """The rows after the due ticks at ``now`` are written by the database and, from the same
    starting rows, by the envelope path; each run is rolled back after it is read."""
    registry = get_registry()
    states = ticks.due_states(due_by=now, future_after=now + timedelta(days=1))
    due = ticks._due_from(states, now, registry)
    assert due, "the comparison needs due ticks"
    results = []
    for write in (lambda: write_ticks(due, registry, now), lambda: by_envelopes(due, registry, now)):
        with transaction.atomic():
            ticks.mark_fresh([loop.name for loop, _, fresh in due if fresh], now)
            write()
            results.append(stored_rows())
            transaction.set_rollback(True)
    return results[0], results[1]


def test_every_row_is_the_envelope_paths_for_loops_of_every_shape(registry_files):
    varied_loops(registry_files)
    tick("2026-11-30T21:00:00.300Z")  # every loop fires fresh; then 22 minutes pass
    database, envelopes = both_paths(at("2026-11-30T21:22:00.400Z"))
    assert database == envelopes
    assert [row[0] for row in database["events"][5:]] == [
        "clock:a-minute:2026-11-30T21:22:00Z", "clock:b-last:2026-11-30T21:15:00Z",
        "clock:c-all:2026-11-30T21:05:00Z", "clock:c-all:2026-11-30T21:10:00Z", "clock:c-all:2026-11-30T21:15:00Z",
        "clock:c-all:2026-11-30T21:20:00Z", "clock:d-paris:2026-11-30T21:10:00Z", "clock:e-rich:2026-11-30T21:22:00Z",
    ]
    rich = {**RICH_PAYLOAD, "slot": "2026-11-30T21:22:00Z", "loop": "e-rich", "cadenceSeconds": 60, "skippedSlots": 21}
    stored = database["events"][-1][7]
    assert (json.loads(stored) if isinstance(stored, str) else stored) == rich
    assert [row[4] for row in database["states"][1:3]] == [
        "clock:b-last:2026-11-30T21:15:00Z", "clock:c-all:2026-11-30T21:20:00Z",
    ]


def test_a_fresh_burst_writes_the_envelope_paths_rows(registry_files):
    varied_loops(registry_files)
    ticks.ensure_synced(get_registry(), at("2026-11-30T21:00:00Z"))
    database, envelopes = both_paths(at("2026-11-30T21:00:00.300Z"))
    assert database == envelopes
    assert [row[0] for row in database["events"]] == [
        "clock:a-minute:2026-11-30T21:00:00Z", "clock:b-last:2026-11-30T21:00:00Z",
        "clock:c-all:2026-11-30T21:00:00Z", "clock:d-paris:2026-11-29T21:10:00Z",
        "clock:e-rich:2026-11-30T21:00:00Z",
    ]


def test_a_tick_already_stored_is_not_written_again_nor_journaled(registry_files):
    varied_loops(registry_files)
    tick("2026-11-30T21:00:00.300Z")
    now = at("2026-11-30T21:01:00.300Z")
    registry = get_registry()
    due = ticks._due_from(ticks.due_states(due_by=now, future_after=now + timedelta(days=1)), now, registry)
    with transaction.atomic():
        first = write_ticks(due, registry, now)
    with transaction.atomic():
        again = write_ticks(due, registry, now + timedelta(seconds=1))
    assert sorted(first) == ["clock:a-minute:2026-11-30T21:01:00Z", "clock:e-rich:2026-11-30T21:01:00Z"]
    assert again == set()
    assert JournalEntry.objects.filter(action="event_admitted", data__eventId__in=sorted(first)).count() == 2


def test_a_form_is_the_payload_text_split_where_the_tick_fills_it_in(registry_files):
    varied_loops(registry_files)
    form = tick_form(get_registry().loops["e-rich"])
    loop, event_type, subject, head, middle, tail, index = json.loads(form.row_head + ",7]")
    assert (form.loop, loop, event_type, subject, index) == ("e-rich", "e-rich", "test.tick.rich", "e-rich", 7)
    assert head == '{"note": "caf\\u00e9 \\"quoted\\" \\\\ back\\nslash \\u2028 \\ud83d\\ude00", "slot": "'
    assert middle == '", "n": [1, 2.5, null, true], "loop": "e-rich", "cadenceSeconds": 60, "skippedSlots": '
    assert tail == "}"
    payload = {**RICH_PAYLOAD, "slot": "2026-11-30T21:22:00Z", "loop": "e-rich", "cadenceSeconds": 60, "skippedSlots": 3}
    assert head + "2026-11-30T21:22:00Z" + middle + "3" + tail == json.dumps(payload)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's commit setting")
@pytest.mark.django_db(transaction=True)  # the setting ends with a real transaction, not a savepoint
def test_a_chunks_commit_does_not_wait_for_the_flush_and_the_next_transactions_does(registry_files):
    """docs/design.md §5: a chunk of ticks commits without waiting for the WAL's flush; the
    connection's next transaction waits again."""
    varied_loops(registry_files)
    tick("2026-11-30T21:00:00.300Z")
    now = at("2026-11-30T21:01:00.300Z")
    registry = get_registry()
    due = ticks._due_from(ticks.due_states(due_by=now, future_after=now + timedelta(days=1)), now, registry)
    with connection.cursor() as cursor:
        with transaction.atomic():
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)
            assert sorted(write_ticks(due, registry, now)) == [
                "clock:a-minute:2026-11-30T21:01:00Z", "clock:e-rich:2026-11-30T21:01:00Z",
            ]
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("off",)
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
