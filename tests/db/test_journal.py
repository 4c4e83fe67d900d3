"""The journal is append-only in the model, the queryset and the database (docs/design.md §9)."""

import pytest
from django.db import DatabaseError, connection, transaction

from runtime.models import Actor, JournalEntry
from runtime.services.journal import record
from tests.conftest import at

pytestmark = pytest.mark.django_db


@pytest.fixture
def entry():
    return record("note", Actor.SYSTEM, at=at("2026-11-30T10:00:00Z"), data={"n": 1})


def test_the_model_and_queryset_refuse_changes(entry):
    entry.action = "rewritten"
    with pytest.raises(PermissionError):
        entry.save()
    with pytest.raises(PermissionError):
        entry.delete()
    with pytest.raises(PermissionError):
        JournalEntry.objects.filter(pk=entry.pk).update(action="rewritten")
    with pytest.raises(PermissionError):
        JournalEntry.objects.all().delete()


@pytest.mark.parametrize("sql", [
    "UPDATE runtime_journalentry SET action = 'rewritten'",
    "DELETE FROM runtime_journalentry",
])
def test_the_database_refuses_updates_and_deletes(entry, sql):
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
    assert JournalEntry.objects.get(pk=entry.pk).action == "note"


def test_an_operator_entry_must_name_the_operator():
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            record("proposal_approved", Actor.OPERATOR, at=at("2026-11-30T10:00:00Z"))
