"""``manage.py flush``, which cannot empty the append-only journal (docs/design.md §9).

Django's ``flush`` empties every table; the journal's triggers refuse that (PostgreSQL:
``BEFORE TRUNCATE``, migration 0007; SQLite: ``BEFORE DELETE``, migration 0002), so this
command says so instead of failing with the database's error.

The test suite resets its databases through this command (a ``TransactionTestCase``, a
``transactional_db`` test); its settings set ``FACTORY_FLUSH_EMPTIES_JOURNAL``, which no
environment variable can set. Then the flush runs in one transaction that opens the
guard's one door — on PostgreSQL ``SET LOCAL factory.journal_archive = 'on'`` (the door
a later audited archive path will use), on SQLite the delete trigger dropped and
re-created inside the same transaction — so the guard is back in force at its end.
"""

from importlib import import_module

from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands import flush
from django.db import connections, transaction

from runtime.models import JournalEntry

append_only = import_module("runtime.migrations.0002_journal_append_only")
truncate_guard = import_module("runtime.migrations.0007_journal_truncate_guard")


class Command(flush.Command):
    help = flush.Command.help + " Refused while the append-only journal exists (docs/design.md §9)."

    def handle(self, **options):
        connection = connections[options["database"]]
        journal = JournalEntry._meta.db_table
        if journal not in connection.introspection.table_names():
            return super().handle(**options)
        if not settings.FACTORY_FLUSH_EMPTIES_JOURNAL:
            raise CommandError(
                f"flush would empty the journal ({journal}), which is append-only (docs/design.md §9): "
                "the database refuses TRUNCATE and DELETE on it. Start from a new database instead "
                "(a new DATABASE_URL, then manage.py migrate)."
            )
        with transaction.atomic(using=options["database"]), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"SET LOCAL {truncate_guard.ARCHIVE_SETTING} = 'on'")
                return super().handle(**options)
            for sql in append_only.statements(connection.vendor, reverse=True):
                cursor.execute(sql)
            super().handle(**options)
            for sql in append_only.statements(connection.vendor, reverse=False):
                cursor.execute(sql)
