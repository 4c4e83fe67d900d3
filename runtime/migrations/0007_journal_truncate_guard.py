"""The journal refuses TRUNCATE on PostgreSQL (docs/design.md §9).

Row triggers (0002) refuse UPDATE and DELETE, but TRUNCATE fires no row trigger: a
statement-level ``BEFORE TRUNCATE`` trigger refuses it, a ``TRUNCATE … CASCADE`` from
another table included. It lets a transaction through only when the session setting
``factory.journal_archive`` is ``on`` (``SET LOCAL factory.journal_archive = 'on'``): the
one door a later, audited archive path will use, and which the test suite's database
reset uses today (runtime/management/commands/flush.py). SQLite has no TRUNCATE: its
``DELETE`` trigger (0002) already covers every way to empty the table.
"""

from django.db import migrations

#: The session setting that lets a TRUNCATE of the journal through (docs/design.md §9).
ARCHIVE_SETTING = "factory.journal_archive"

POSTGRESQL = [
    f"""CREATE OR REPLACE FUNCTION runtime_journal_refuse_truncate() RETURNS trigger AS $$
       BEGIN
         IF current_setting('{ARCHIVE_SETTING}', true) = 'on' THEN RETURN NULL; END IF;
         RAISE EXCEPTION 'the journal is append-only: TRUNCATE of runtime_journalentry is refused'
           USING HINT = 'only the audited archive path, which sets {ARCHIVE_SETTING}, may empty it';
       END; $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER runtime_journal_no_truncate BEFORE TRUNCATE ON runtime_journalentry
       FOR EACH STATEMENT EXECUTE FUNCTION runtime_journal_refuse_truncate()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS runtime_journal_no_truncate ON runtime_journalentry",
    "DROP FUNCTION IF EXISTS runtime_journal_refuse_truncate()",
]


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in POSTGRESQL:
            schema_editor.execute(sql)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in POSTGRESQL_REVERSE:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0006_domain_idempotency")]
    operations = [migrations.RunPython(install, uninstall)]
