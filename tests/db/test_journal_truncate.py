"""The journal refuses TRUNCATE on PostgreSQL, and ``flush`` says why it cannot empty it — while the
suite still resets its databases through the guard's one door (issue 11, list 5; docs/design.md §9)."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from runtime.models import Actor, Event, JournalEntry
from runtime.services.journal import record
from tests.conftest import at

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has no TRUNCATE")


def note():
    return record("note", Actor.SYSTEM, at=at("2026-11-30T10:00:00Z"), data={"n": 1})


def settle(cursor):
    """Check the test transaction's deferred foreign keys now: PostgreSQL refuses any TRUNCATE of
    a table with pending trigger events before its own triggers run."""
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


@postgresql_only
@pytest.mark.django_db
@pytest.mark.parametrize("sql", [
    "TRUNCATE runtime_journalentry",
    "TRUNCATE runtime_event CASCADE",
])
def test_postgresql_refuses_truncate_of_the_journal(sql):
    entry = note()
    with pytest.raises(DatabaseError, match="the journal is append-only: TRUNCATE of runtime_journalentry is refused"):
        with transaction.atomic(), connection.cursor() as cursor:
            settle(cursor)
            cursor.execute(sql)
    assert JournalEntry.objects.filter(pk=entry.pk).exists()


@postgresql_only
@pytest.mark.django_db
def test_the_archive_setting_is_the_guards_one_door():
    note()
    with transaction.atomic():
        with connection.cursor() as cursor:
            settle(cursor)
            cursor.execute("SET LOCAL factory.journal_archive = 'on'")
            cursor.execute("TRUNCATE runtime_journalentry")
        assert not JournalEntry.objects.exists()
        transaction.set_rollback(True)
    assert JournalEntry.objects.count() == 1
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            settle(cursor)
            cursor.execute("TRUNCATE runtime_journalentry")


@pytest.mark.django_db
def test_flush_says_why_it_cannot_empty_the_journal(settings):
    settings.FACTORY_FLUSH_EMPTIES_JOURNAL = False
    note()
    with pytest.raises(CommandError) as refused:
        call_command("flush", interactive=False, verbosity=0)
    assert str(refused.value) == (
        "flush would empty the journal (runtime_journalentry), which is append-only (docs/design.md §9): the "
        "database refuses TRUNCATE and DELETE on it. Start from a new database instead (a new DATABASE_URL, "
        "then manage.py migrate)."
    )
    assert JournalEntry.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_suites_reset_empties_the_journal_and_leaves_the_guard_in_force():
    note()
    call_command("flush", interactive=False, verbosity=0)
    assert (JournalEntry.objects.count(), Event.objects.count()) == (0, 0)
    note()
    for sql in ("DELETE FROM runtime_journalentry", "UPDATE runtime_journalentry SET action = 'x'") + (
        ("TRUNCATE runtime_journalentry",) if connection.vendor == "postgresql" else ()
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql)


@postgresql_only
@pytest.mark.django_db
def test_the_row_trigger_lets_a_delete_through_the_archive_door_and_never_an_update():
    kept, archived = note(), note()
    with pytest.raises(DatabaseError, match="the journal is append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM runtime_journalentry WHERE id = %s", [archived.pk])
    with pytest.raises(DatabaseError, match="the journal is append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL factory.journal_archive = 'on'")
            cursor.execute("UPDATE runtime_journalentry SET action = 'x' WHERE id = %s", [kept.pk])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL factory.journal_archive = 'on'")
        cursor.execute("DELETE FROM runtime_journalentry WHERE id = %s", [archived.pk])
    assert list(JournalEntry.objects.values_list("pk", "action")) == [(kept.pk, "note")]
