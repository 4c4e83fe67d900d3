"""``record_values`` of ``entry_row``s writes the rows ``bulk_create`` of ``entry``s would, in order and in chunks (docs/design.md §9)."""

from datetime import timedelta, timezone

import pytest
from django.db import IntegrityError, connection, transaction

from runtime.models import Actor, JournalEntry, Proposal, Run
from runtime.services import journal
from runtime.services.journal import entry, entry_row, record_values
from runtime.services.planning import plan_event
from tests.conftest import SHA, at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

MERGE = {"repo": "alpha", "prNumbers": [7], "headSha": SHA}
#: A JSON value with what an encoder can get wrong: non-ASCII text, escapes, nesting, numbers.
AWKWARD = {
    "reason": "Überprüfung fehlgeschlagen — 再試行 🚀", "quote": "a \"b\" \\ c\n\t",
    "nested": {"list": [1, 2.5, -3, None, True, False, {"deep": ["x", {}]}], "empty": []},
    "big": 12345678901234567890, "zero": 0,
}


def _stored(ids):
    """The stored columns of ``ids`` as the database returns them, in id order (JSON and
    instants as their text, so an encoding difference shows)."""
    data, instant = ("data::text", "at::text") if connection.vendor == "postgresql" else ("data", "at")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {instant}, action, actor, actor_name, event_id, proposal_id, run_id, {data} "
            f"FROM runtime_journalentry WHERE id IN ({', '.join(['%s'] * len(ids))}) ORDER BY id",
            list(ids),
        )
        return cursor.fetchall()


def _batch(event, proposal, run, build=entry):
    """Entries (``build``: ``entry`` or ``entry_row``) with every kind of link (none, event
    only, all three) and instants given in other offsets and with microseconds."""
    berlin = timezone(timedelta(hours=1))
    return [
        build("note", Actor.SYSTEM, at=at("2026-11-30T10:00:00Z")),
        build("note", Actor.OPERATOR, actor_name="Zoë", at=at("2026-11-30T10:00:00.123456Z"), event=event, data=AWKWARD),
        build("run_queued", Actor.INJECT, at=at("2026-11-30T10:00:01Z").astimezone(berlin), run=run, data={"n": 1}),
        build("proposal_created", Actor.INJECT, at=at("2026-11-30T23:59:59.999999Z"), proposal=proposal, data={"ü": ["ß"]}),
    ]


def test_entry_rows_store_exactly_what_bulk_create_of_entries_stores():
    event = inject("merge-1", "factory.merge.requested", MERGE).event
    plan_event(event.pk, now=at("2026-11-30T10:00:00Z"))
    proposal, run = Proposal.objects.get(event=event), Run.objects.get(proposal__event=event)
    before = JournalEntry.objects.order_by("-id").values_list("id", flat=True).first()
    by_orm = JournalEntry.objects.bulk_create(_batch(event, proposal, run))
    assert record_values(_batch(event, proposal, run, build=entry_row)) == 4
    written = list(JournalEntry.objects.filter(id__gt=by_orm[-1].pk).order_by("id").values_list("id", flat=True))
    assert len(written) == 4 and by_orm[0].pk > before
    assert _stored(written) == _stored([made.pk for made in by_orm])
    assert [(e.event_id, e.proposal_id, e.run_id, e.data) for e in JournalEntry.objects.filter(id__in=written).order_by("id")] == [
        (None, None, None, {}),
        (event.pk, None, None, AWKWARD),
        (event.pk, None, run.pk, {"n": 1}),
        (event.pk, proposal.pk, None, {"ü": ["ß"]}),
    ]
    assert JournalEntry.objects.get(id=written[2]).at == at("2026-11-30T10:00:01Z")


def test_record_values_writes_in_chunks_in_the_order_given(monkeypatch):
    monkeypatch.setattr(journal, "INSERT_ROWS", 3)
    made = [entry_row("note", Actor.SYSTEM, at=at("2026-11-30T10:00:00Z"), data={"n": n}) for n in range(7)]
    assert record_values(made) == 7
    assert [row.data["n"] for row in JournalEntry.objects.order_by("id")] == list(range(7))


def test_record_values_of_nothing_writes_nothing():
    assert record_values([]) == 0
    assert JournalEntry.objects.count() == 0


def test_a_refused_row_fails_its_whole_batch():
    made = [
        entry_row("note", Actor.SYSTEM, at=at("2026-11-30T10:00:00Z")),
        entry_row("note", Actor.OPERATOR, at=at("2026-11-30T10:00:00Z")),  # an operator must be named
    ]
    with pytest.raises(IntegrityError), transaction.atomic():
        record_values(made)
    assert JournalEntry.objects.count() == 0
