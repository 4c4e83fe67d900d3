"""Batched admission of ticks and of any envelopes (docs/design.md §3, §5): exactly once by eventId,
a refused envelope journaled and the rest admitted, a crash between chunks losing and doubling nothing."""

from unittest import mock

import pytest
from django.db import IntegrityError, connection, transaction

from lib.slots import DueSlot
from ops.slot_loop import iterate
from runtime.models import Door, Event, JournalEntry
from runtime.registry import get_registry
from runtime.services.admission import admit_batch, admit_event
from schedules import ticks
from schedules.envelope import tick_envelope
from schedules.models import ScheduleState
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

SLOT = "2026-11-30T21:07:00Z"


def five_loops(registry_files) -> list[str]:
    """Five enabled one-minute watched loops (reaper copies), each fired once at 21:06."""
    def change(data):
        template = {**data["reaper"], "every": "1m", "enabled": True}
        data.clear()
        data.update({f"loop-{i}": dict(template) for i in range(5)})
    registry_files.update("schedules.json", change)
    tick("2026-11-30T21:06:00Z")
    return [f"loop-{i}" for i in range(5)]


def admitted_entries(event_ids) -> list[str]:
    return sorted(
        JournalEntry.objects.filter(action="event_admitted", data__eventId__in=list(event_ids))
        .values_list("data__eventId", flat=True)
    )


def test_a_tick_another_process_admitted_is_a_duplicate_and_the_rest_of_the_batch_is_admitted(registry_files):
    names = five_loops(registry_files)
    ids = [f"clock:{name}:{SLOT}" for name in names]
    registry = get_registry()
    other = tick_envelope(registry.loops["loop-2"], DueSlot(at(SLOT), 0))
    assert admit_event(other, door=Door.SCHEDULE, now=at("2026-11-30T21:07:00.100Z"), registry=registry).admitted

    report = tick("2026-11-30T21:07:00.500Z")
    assert [(t.event_id, t.admitted) for t in report.ticks] == [(i, i != ids[2]) for i in ids]
    assert Event.objects.filter(uid__in=ids).count() == 5
    assert admitted_entries(ids) == ids  # one entry each: the other process's and four of this batch
    states = ScheduleState.objects.filter(loop__in=names).order_by("loop")
    assert [(s.last_event_id, s.next_due) for s in states] == [(i, at("2026-11-30T21:08:00Z")) for i in ids]


def test_a_refused_envelope_in_a_batch_is_reported_by_position_and_the_rest_admitted(registry_files):
    registry = get_registry()
    good = [tick_envelope(registry.loops["heartbeat"], DueSlot(at(s), 0))
            for s in ("2026-11-30T21:00:00Z", "2026-11-30T21:05:00Z")]
    bad = {**good[0], "eventId": "clock:heartbeat:bogus", "type": "no.such.type"}
    batch = admit_batch([good[0], bad, good[1], good[0]], door=Door.SCHEDULE, now=at("2026-11-30T21:06:00Z"),
                        registry=registry)
    assert batch.refused == {1: [{"code": "unregistered_type", "detail": "event type 'no.such.type' is not registered"}]}
    assert sorted(batch.admitted) == [good[0]["eventId"], good[1]["eventId"]]
    assert batch.duplicates == set()
    assert sorted(Event.objects.values_list("uid", flat=True)) == sorted(batch.admitted)
    assert admitted_entries(batch.admitted) == sorted(batch.admitted)

    again = admit_batch(good, door=Door.SCHEDULE, now=at("2026-11-30T21:06:01Z"), registry=registry)
    assert (again.admitted, again.duplicates) == ({}, {good[0]["eventId"], good[1]["eventId"]})
    assert JournalEntry.objects.filter(action="event_admitted").count() == 2


def test_a_crash_between_chunks_loses_and_doubles_nothing(registry_files, monkeypatch):
    names = five_loops(registry_files)
    ids = [f"clock:{name}:{SLOT}" for name in names]
    monkeypatch.setattr(ticks, "CHUNK", 2)
    real = ticks.write_ticks
    calls = []

    def crash_on_the_second_chunk(chunk, registry, now):
        calls.append(len(chunk))
        written = real(chunk, registry, now)  # the chunk's rows are written, then the process dies
        if len(calls) == 2:
            raise RuntimeError("killed")
        return written

    with mock.patch.object(ticks, "write_ticks", crash_on_the_second_chunk), pytest.raises(RuntimeError):
        tick("2026-11-30T21:07:00.500Z")
    assert list(Event.objects.filter(uid__in=ids).order_by("uid").values_list("uid", flat=True)) == ids[:2]

    report = tick("2026-11-30T21:07:01Z")
    assert [(t.event_id, t.admitted) for t in report.ticks] == [(i, True) for i in ids[2:]]
    assert Event.objects.filter(uid__in=ids).count() == 5
    assert admitted_entries(ids) == ids
    assert tick("2026-11-30T21:07:02Z").ticks == []


def test_a_lost_lease_stops_the_burst_between_chunks(registry_files, monkeypatch):
    five_loops(registry_files)
    monkeypatch.setattr(ticks, "CHUNK", 2)
    answers = iter([True, False])
    fired = ticks.emit_due_ticks(now=at("2026-11-30T21:07:00.500Z"), registry=get_registry(), renew=lambda: next(answers))
    assert [t.loop for t in fired] == ["loop-0", "loop-1", "loop-2", "loop-3"]
    assert Event.objects.filter(slot=at(SLOT)).count() == 4


def statement_names(queries) -> list[str]:
    """``SELECT schedules_schedulestate``: each statement's verb and first table, in order."""
    names = []
    for query in queries:
        words = query["sql"].replace('"', "").split()
        table = next((words[n + 1] for n, w in enumerate(words[:-1]) if w.upper() in ("FROM", "INTO", "UPDATE")), "")
        names.append(f"{words[0].upper()} {table}".strip())
    return names


def idle_statements(registry_files, count: int, minute: str) -> tuple[list[str], list[str]]:
    """The statements of ``emit_due_ticks`` and of a whole iteration, nothing due, ``count``
    one-minute loops all fired at ``minute`` (``2026-11-30T21:MM``)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def change(data):
        template = {**(data.get("reaper") or data["loop-0000"]), "every": "1m", "enabled": True}
        data.clear()
        data.update({f"loop-{i:04d}": dict(template) for i in range(count)})
    registry_files.update("schedules.json", change)
    with mock.patch("ops.slot_loop.plan_pending", return_value=0):
        assert len(tick(f"{minute}:00Z").ticks) == count
    Event.objects.update(planned_at=at(f"{minute}:00Z"), planning_outcome="NOOP")
    with CaptureQueriesContext(connection) as emission:
        assert ticks.emit_due_ticks(now=at(f"{minute}:02Z"), registry=get_registry()) == []
    iterate(now=at(f"{minute}:02.500Z"))  # the first one creates the doctor's row
    with CaptureQueriesContext(connection) as iteration:
        report = iterate(now=at(f"{minute}:03Z"))
    assert (report.ticks, report.planned, report.published) == ([], 0, 0)
    return statement_names(emission.captured_queries), statement_names(iteration.captured_queries)


def test_an_idle_iteration_makes_the_same_named_statements_at_10_and_1000_loops(registry_files):
    few = idle_statements(registry_files, 10, "2026-11-30T21:06")
    many = idle_statements(registry_files, 1000, "2026-11-30T21:16")
    # One statement: synced with this registry? any state due, or to repair? any keyed row to repair?
    assert few[0] == many[0] == ["SELECT schedules_schedulesync"]
    assert few[1] == many[1] == [
        # One statement (schedules.due_check.check_idle): any outbox row pending? any event
        # to plan? and the ticks' question, as above.
        "SELECT runtime_outboxentry",
        "UPDATE schedules_slotloopstatus",  # the doctor's row
    ]


def stored(model, **filters) -> dict:
    """A row's columns as read back, less the generated id and the links that name ids."""
    row = model.objects.filter(**filters).values().get()
    return {k: v for k, v in row.items() if k not in {"id", "event_id"}}


def test_a_batch_admission_stores_the_rows_a_single_admission_stores():
    """``admit_batch`` builds column values without model instances; the event and its
    journal entry read back exactly as ``admit_event``'s (admitted once each way, the first
    rolled back)."""
    registry = get_registry()
    now = at("2026-11-30T21:07:00.250Z")
    envelope = tick_envelope(registry.loops["heartbeat"], DueSlot(at("2026-11-30T21:05:00Z"), 1))

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic():
        admit_event(envelope, door=Door.SCHEDULE, now=now, registry=registry)
        single = (stored(Event, uid=envelope["eventId"]), stored(JournalEntry, action="event_admitted"))
        raise RolledBack
    batch = admit_batch([envelope], door=Door.SCHEDULE, now=now, registry=registry, validate=False)
    assert list(batch.admitted) == [envelope["eventId"]]
    batched = (stored(Event, uid=envelope["eventId"]), stored(JournalEntry, action="event_admitted"))
    assert batched == single
    assert (batched[0]["slot"], batched[0]["loop"], batched[0]["admitted_at"], batched[1]["actor"]) == (
        at("2026-11-30T21:05:00Z"), "heartbeat", now, "schedule",
    )


def test_the_batch_insert_names_every_event_column():
    from runtime.services.admission import EVENT_COLUMNS

    assert sorted(EVENT_COLUMNS) == sorted(f.column for f in Event._meta.concrete_fields if not f.primary_key)


@pytest.mark.parametrize("case", ["idle", "unsynced", "due", "future state", "future keyed row"])
def test_the_idle_check_answers_nothing_due_only_when_nothing_is(registry_files, case):
    from schedules.due_check import nothing_due
    from schedules.models import KeyedSchedule, ScheduleSync

    five_loops(registry_files)
    tick("2026-11-30T21:07:00Z")
    sync = ScheduleSync.objects.get()
    fingerprint, now = sync.fingerprint, at("2026-11-30T21:07:30Z")
    if case == "unsynced":
        fingerprint = "another registry"
    elif case == "due":
        ScheduleState.objects.filter(loop="loop-3").update(next_due=at("2026-11-30T21:07:30Z"))
    elif case == "future state":
        ScheduleState.objects.filter(loop="loop-3").update(last_slot=at("2026-11-30T21:09:00Z"))
    elif case == "future keyed row":
        KeyedSchedule.objects.create(
            loop="loop-9", key="k", rule="every", every_seconds=60, last_slot=at("2026-11-30T21:09:00Z"),
            next_due=at("2026-11-30T21:10:00Z"), set_by="evt-1", recorded_at=now,
        )
    answer = nothing_due(sync_name=sync.name, fingerprint=fingerprint, due_by=now, future_after=at("2026-11-30T21:07:40Z"))
    assert answer is (case == "idle")


@pytest.mark.parametrize("case", ["idle", "due", "unsynced", "unplanned event"])
def test_the_combined_check_answers_the_ticks_and_the_backlog_in_one_statement(registry_files, case):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runtime.services.backlog import Backlog
    from schedules.due_check import check_idle
    from schedules.models import ScheduleSync

    five_loops(registry_files)
    tick("2026-11-30T21:07:00Z")
    Event.objects.update(planned_at=at("2026-11-30T21:07:00Z"), planning_outcome="NOOP")
    sync = ScheduleSync.objects.get()
    fingerprint, now = sync.fingerprint, at("2026-11-30T21:07:30Z")
    if case == "due":
        ScheduleState.objects.filter(loop="loop-3").update(next_due=now)
    elif case == "unsynced":
        fingerprint = "another registry"
    elif case == "unplanned event":
        Event.objects.filter(pk=Event.objects.order_by("id").first().pk).update(planned_at=None)
    with CaptureQueriesContext(connection) as captured:
        answer = check_idle(sync_name=sync.name, fingerprint=fingerprint, due_by=now, future_after=at("2026-11-30T21:07:40Z"))
    assert len(captured.captured_queries) == 1
    assert answer == (
        case not in ("due", "unsynced"), Backlog(outbox=False, events=case == "unplanned event"),
    )


KERNEL_KEYED_WORK = ["idle", "no state row", "enabled but marked disabled", "an event past the cursor", "a row due"]


@pytest.mark.parametrize("case", KERNEL_KEYED_WORK)
def test_the_idle_check_sees_the_keyed_loops_work(registry_files, case):
    """With the kernel's keyed loop (customer-digest), enabled in the overlay: the check says
    idle only when its state is there and enabled, no setting or clearing event lies past
    its cursor and none of its rows is due."""
    from schedules.due_check import nothing_due
    from schedules.models import KeyedSchedule, ScheduleSync
    from schedules.state import SYNC_NAME, loops_fingerprint
    from schedules.ticks import keyed_loops

    registry_files.write_config("schedule.yaml", "schedules:\n  customer-digest:\n    enabled: true\n")
    registry = get_registry()
    tick("2026-11-30T21:06:00Z")
    now = at("2026-11-30T21:06:30Z")
    if case == "no state row":
        ScheduleState.objects.filter(loop="customer-digest").delete()
    elif case == "enabled but marked disabled":
        ScheduleState.objects.filter(loop="customer-digest").update(enabled=False)
    elif case == "an event past the cursor":
        inject_event = {"customer": "c-1", "at": "09:00", "timezone": "Europe/Berlin"}
        from tests.helpers import inject

        inject("digest-1", "customer.digest-time.chosen", inject_event)
    elif case == "a row due":
        KeyedSchedule.objects.create(
            loop="customer-digest", key="c-2", rule="at", at="09:00", timezone="Europe/Berlin",
            next_due=at("2026-11-30T21:06:00Z"), set_by="evt-2", recorded_at=now,
        )
    assert ScheduleSync.objects.get().fingerprint == loops_fingerprint(registry)
    answer = nothing_due(
        sync_name=SYNC_NAME, fingerprint=loops_fingerprint(registry), due_by=now,
        future_after=at("2026-11-30T21:06:40Z"), keyed=tuple(keyed_loops(registry)),
    )
    assert answer is (case == "idle")


def test_an_idle_iteration_with_the_kernels_keyed_loop_is_still_two_statements(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  customer-digest:\n    enabled: true\n")
    tick("2026-11-30T21:06:00Z")
    iterate(now=at("2026-11-30T21:06:01Z"))
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as iteration:
        report = iterate(now=at("2026-11-30T21:06:02Z"))
    assert (report.ticks, report.planned, report.published) == ([], 0, 0)
    assert statement_names(iteration.captured_queries) == ["SELECT runtime_outboxentry", "UPDATE schedules_slotloopstatus"]


def test_each_chunk_of_a_burst_is_stamped_when_it_is_admitted(registry_files, monkeypatch):
    """A tick's admittedAt (and its loop's last tick) is its chunk's instant: the burst's
    ``now`` plus the time the burst took before the chunk, not the instant it began."""
    import types

    names = five_loops(registry_files)
    monkeypatch.setattr(ticks, "CHUNK", 2)
    clock = iter([100.0, 101.5, 103.0])  # the burst's start, then before chunks 2 and 3
    monkeypatch.setattr(ticks, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    tick("2026-11-30T21:07:00.500Z")
    stamps = [
        Event.objects.get(uid=f"clock:{name}:{SLOT}").admitted_at for name in names
    ]
    first, second, third = at("2026-11-30T21:07:00.500Z"), at("2026-11-30T21:07:02Z"), at("2026-11-30T21:07:03.500Z")
    assert stamps == [first, first, second, second, third]
    assert [s.last_tick_at for s in ScheduleState.objects.filter(loop__in=names).order_by("loop")] == stamps
    assert [e.at for e in JournalEntry.objects.filter(action="event_admitted", data__eventId__in=[
        f"clock:{name}:{SLOT}" for name in names]).order_by("id")] == stamps


def test_a_loop_has_one_state_row_and_its_name_no_pattern_index():
    ScheduleState.objects.create(loop="heartbeat", enabled=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        ScheduleState.objects.create(loop="heartbeat", enabled=True)
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, ScheduleState._meta.db_table)
    on_loop = sorted(name for name, index in indexes.items() if index["columns"] == ["loop"])
    # PostgreSQL: the named constraint alone; SQLite: the column's own UNIQUE, which Django introspects unnamed.
    assert on_loop == (["schedule_state_one_per_loop"] if connection.vendor == "postgresql"
                       else ["__unnamed_constraint_1__"])


def test_an_iteration_logs_a_line_for_its_first_ticks_and_one_line_for_the_rest(registry_files, monkeypatch, caplog):
    five_loops(registry_files)
    caplog.clear()
    monkeypatch.setattr(ticks, "TICK_LINES", 2)
    with caplog.at_level("INFO", logger="schedules.ticks"):
        tick("2026-11-30T21:07:00.500Z")
        tick("2026-11-30T21:10:00.500Z")
    records = [r for r in caplog.records if r.name == "schedules.ticks"]
    assert [(r.levelname, r.getMessage(), getattr(r, "action", None)) for r in records] == [
        ("INFO", "loop loop-0 fired slot 2026-11-30T21:07:00Z (0 skipped)", "tick_admitted"),
        ("INFO", "loop loop-1 fired slot 2026-11-30T21:07:00Z (0 skipped)", "tick_admitted"),
        ("INFO", "3 more ticks admitted this iteration; the journal has each", "ticks_admitted"),
        ("WARNING", "loop loop-0 fired slot 2026-11-30T21:10:00Z (2 skipped)", "tick_admitted"),
        ("WARNING", "loop loop-1 fired slot 2026-11-30T21:10:00Z (2 skipped)", "tick_admitted"),
        ("WARNING", "3 more ticks admitted this iteration, 3 after skipped slots (loop-2, loop-3, loop-4); "
                    "the journal has each", "ticks_admitted"),
    ]
    summary = records[-1]
    assert (summary.ticks, summary.loopsSkipping, summary.skippedSlots) == (3, 3, 6)
    assert JournalEntry.objects.filter(action="event_admitted").count() == 15
