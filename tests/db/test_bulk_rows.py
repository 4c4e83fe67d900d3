"""The batched paths' plain multi-row inserts store what Django's ``save`` stores (docs/performance.md)."""

import pytest
from django.db import DataError, IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from lib.slots import DueSlot
from runtime.models import Actor, Door, Event, JournalEntry, Proposal, Run
from runtime.registry import get_registry
from runtime.services import bulk_rows, journal
from runtime.services.admission import admit_event
from runtime.services.bulk_rows import backend_vendor, insert_rows, json_rows, one_of, stored_instant
from runtime.services.planning import decide, new_proposal, proposal_fields
from runtime.services.runs import queue_run, run_fields
from schedules.envelope import tick_envelope
from tests.conftest import at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = "2026-11-30T21:05:00.300Z"


def heartbeat_tick() -> Event:
    registry = get_registry()
    envelope = tick_envelope(registry.loops["heartbeat"], DueSlot(at("2026-11-30T21:05:00Z"), 0))
    return admit_event(envelope, door=Door.SCHEDULE, now=at(NOW), registry=registry).event


def planned(event: Event) -> Proposal:
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    return new_proposal(event, decision, registry, at(NOW))


def columns(model, pk) -> dict:
    """The row as the database stores it (JSON as its text on SQLite, booleans as 0/1), not as
    the ORM reads it back: a different stored form would read back the same."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {model._meta.db_table} WHERE id = %s", [pk])
        row = dict(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))
    return {k: v for k, v in row.items() if k not in {"id", "proposal_id"}}


def test_inserted_proposals_and_runs_read_back_as_saved_ones_and_get_their_ids():
    event = heartbeat_tick()

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic():
        proposal = planned(event)
        proposal.save(force_insert=True)
        run = queue_run(proposal, actor=Actor.SCHEDULE, approved_by=None, now=at(NOW))
        saved = (columns(Proposal, proposal.pk), columns(Run, run.pk))
        raise RolledBack
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    fields = {**proposal_fields(event, decision, registry, at(NOW)), "event_id": event.pk}
    with transaction.atomic():
        proposal_ids = insert_rows(Proposal, [fields], key="event_id")
        run = {**run_fields(fields, door=event.door, actor=Actor.SCHEDULE, now=at(NOW)),
               "proposal_id": proposal_ids[event.pk]}
        run_ids = insert_rows(Run, [run], key="proposal_id")
    assert list(proposal_ids) == [event.pk] and list(run_ids) == [proposal_ids[event.pk]]
    assert (columns(Proposal, proposal_ids[event.pk]), columns(Run, run_ids[proposal_ids[event.pk]])) == saved
    assert Run.objects.get(pk=run_ids[proposal_ids[event.pk]]).proposal_id == proposal_ids[event.pk]
    assert saved[1]["status"] == "queued" and Proposal.objects.get(pk=proposal_ids[event.pk]).created_at == at(NOW)
    if connection.vendor == "sqlite":
        assert saved[0]["plan"].startswith('{"definition": "heartbeat@1", "adapter": "builtin", ')  # json.dumps' text, as save() stores it


def test_a_refused_row_refuses_the_statement():
    event = heartbeat_tick()
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    fields = {**proposal_fields(event, decision, registry, at(NOW)), "event_id": event.pk}
    insert_rows(Proposal, [fields], key="event_id")
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Proposal, [fields], key="event_id")  # one proposal per event
    assert Proposal.objects.filter(event=event).count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite does not enforce a text column's length")
def test_a_value_longer_than_its_column_is_refused_not_cut_short():
    event = heartbeat_tick()
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    fields = {**proposal_fields(event, decision, registry, at(NOW)), "event_id": event.pk, "definition": "d" * 101}
    with pytest.raises(DataError, match="too long"), transaction.atomic():
        insert_rows(Proposal, [fields], key="event_id")
    assert Proposal.objects.count() == 0


def test_a_null_json_value_is_stored_as_null():
    event = heartbeat_tick()
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    fields = {**proposal_fields(event, decision, registry, at(NOW)), "event_id": event.pk}
    ids = insert_rows(Run, [{**run_fields(fields, door=event.door, actor=Actor.SCHEDULE, now=at(NOW)),
                              "proposal_id": insert_rows(Proposal, [fields], key="event_id")[event.pk],
                              "result_data": None}], key="proposal_id")
    assert Run.objects.filter(pk__in=ids.values(), result_data__isnull=True).count() == 1


def test_a_field_without_a_default_must_be_given():
    event = heartbeat_tick()
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    fields = {**proposal_fields(event, decision, registry, at(NOW)), "event_id": event.pk}
    del fields["idempotency_key"]
    with pytest.raises(KeyError, match="idempotency_key"):
        insert_rows(Proposal, [fields], key="event_id")
    assert Proposal.objects.count() == 0


def test_json_rows_writes_each_row_as_a_list_and_refuses_what_json_cannot_hold():
    assert json_rows([("x", at("2026-11-30T21:05:00Z"), {"k": [1]}, None)]) == (
        '[["x","2026-11-30T21:05:00+00:00",{"k":[1]},null]]'
    )
    with pytest.raises(TypeError, match="set is not a row value"):
        json_rows([({1},)])


def test_an_instant_is_sent_as_the_text_its_backend_stores():
    expected = "2026-11-30T22:00:20+00:00" if connection.vendor == "postgresql" else "2026-11-30 22:00:20"
    assert (stored_instant(at("2026-11-30T22:00:20Z")), stored_instant(None)) == (expected, None)
    assert backend_vendor() == connection.vendor


def test_a_field_the_model_does_not_have_is_refused_on_every_backend():
    event = heartbeat_tick()
    registry = get_registry()
    decision = decide(event, registry, held=lambda key: False, in_flight=lambda single: False)
    fields = {**proposal_fields(event, decision, registry, at(NOW)), "event_id": event.pk, "colour": "red"}
    with pytest.raises(KeyError, match="unknown fields: \\['colour'\\]"):
        insert_rows(Proposal, [fields], key="event_id")
    assert Proposal.objects.count() == 0


def test_one_of_selects_the_rows_among_the_values_or_outside_them_with_one_parameter_on_postgresql():
    for event_id in ("a'1", "b", "c"):
        inject(event_id, "factory.triage.requested", {"repo": "alpha"})
    quote = connection.ops.quote_name
    for negate, expected in ((False, ["a'1", "c"]), (True, ["b"])):
        condition, params = one_of(quote("uid"), ["c", "a'1", "zz"], negate=negate)
        assert len(params) == (1 if backend_vendor() == "postgresql" else 3)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT uid FROM {quote(Event._meta.db_table)} WHERE {condition} ORDER BY uid", params)
            assert [row[0] for row in cursor.fetchall()] == expected


# The PostgreSQL-only builders of ``recordset``, as text: they run on PostgreSQL only, and the
# mutation run is on SQLite.

def test_typed_rows_casts_each_value_to_its_columns_type_and_a_json_null_to_null():
    assert bulk_rows.typed_rows([("at", "timestamp with time zone"), ("data", "jsonb"), ("id", "bigint")], "j") == (
        '(SELECT (e ->> 0)::timestamp with time zone AS "at", NULLIF(e -> 1, \'null\'::jsonb) AS "data", '
        '(e ->> 2)::bigint AS "id" FROM jsonb_array_elements(%s::jsonb) AS e) AS j'
    )


@pytest.fixture
def declared_types(monkeypatch) -> list:
    """``column_types`` answers from a fixed catalog; the tables asked for are listed."""
    asked = []

    def column_types(table):
        asked.append(table)
        return {"action": "character varying", "data": "jsonb", "extra": "integer"}

    monkeypatch.setattr(bulk_rows, "column_types", column_types)
    return asked


def test_populated_and_recordset_type_the_columns_named_as_the_table_declares(declared_types):
    expected = ('(SELECT NULLIF(e -> 0, \'null\'::jsonb) AS "data", (e ->> 1)::character varying AS "action" '
                'FROM jsonb_array_elements(%s::jsonb) AS e) AS r')
    assert bulk_rows.populated("runtime_journalentry", ["data", "action"], "r") == expected
    assert bulk_rows.recordset("runtime_journalentry", ["data", "action"], [[{"a": 1}, "x"], [None, "y"]], "r") == (
        expected, ['[[{"a":1},"x"],[null,"y"]]'],
    )
    assert declared_types == ["runtime_journalentry", "runtime_journalentry"]


def test_column_types_are_read_once_per_database_and_table(monkeypatch):
    asked = []
    monkeypatch.setattr(bulk_rows, "_column_types", lambda database, table: asked.append((database, table)) or {"a": "b"})
    assert bulk_rows.column_types("runtime_run") == {"a": "b"}
    assert asked == [(connection.settings_dict["NAME"], "runtime_run")]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's catalog")
def test_column_types_are_the_catalogs_without_lengths():
    types = bulk_rows.column_types("runtime_journalentry")
    assert {column: types[column] for column in ("action", "data", "event_id", "at")} == {
        "action": "character varying", "data": "jsonb", "event_id": "bigint", "at": "timestamp with time zone",
    }


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's bound-variable limit")
@pytest.mark.parametrize("fit, statements", [(0, 7), (1, 7), (3, 3)])
def test_on_sqlite_a_statement_carries_as_many_rows_as_the_bound_variable_limit_allows(monkeypatch, fit, statements):
    """A limit that fits ``fit`` rows and not quite one more: 7 rows in ``statements`` inserts
    (at least one row a statement)."""
    width = len(journal.COLUMNS)  # one bound variable a column
    monkeypatch.setattr(bulk_rows, "_sqlite_variable_limit", lambda: (fit + 1) * width - 1)
    rows = [{"at": at(NOW), "action": f"a{n}", "actor": "system"} for n in range(7)]
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        ids = insert_rows(JournalEntry, rows, key="action")
    assert len([query for query in queries if query["sql"].startswith("INSERT")]) == statements
    assert sorted(ids) == [f"a{n}" for n in range(7)]
    assert sorted(JournalEntry.objects.filter(pk__in=ids.values()).values_list("action", flat=True)) == sorted(ids)
