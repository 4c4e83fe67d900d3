"""The journal's row trigger on PostgreSQL lets a DELETE through the archive door (docs/design.md §9).

Migration 0002 refuses every UPDATE and DELETE of a journal row; 0007 refuses TRUNCATE unless
the transaction has set ``factory.journal_archive`` to ``on``. The audited archive path
(``manage.py prune``, runtime/services/retention.py) deletes archived rows, so the row
trigger now honours the same door for DELETE — and only for DELETE: an UPDATE is refused
whatever the setting. The door is a convention of the runtime's own code (any session may
set the variable), not a boundary against someone holding the database's credentials.
SQLite's trigger cannot read a session setting: retention drops and re-creates it inside its
transaction, as ``flush`` does.
"""

from django.db import migrations

ARCHIVE_SETTING = "factory.journal_archive"

FORWARD = f"""CREATE OR REPLACE FUNCTION runtime_journal_refuse() RETURNS trigger AS $$
   BEGIN
     IF TG_OP = 'DELETE' AND current_setting('{ARCHIVE_SETTING}', true) = 'on' THEN RETURN OLD; END IF;
     RAISE EXCEPTION 'the journal is append-only';
   END; $$ LANGUAGE plpgsql"""
#: 0002's function, as it was.
REVERSE = """CREATE OR REPLACE FUNCTION runtime_journal_refuse() RETURNS trigger AS $$
   BEGIN RAISE EXCEPTION 'the journal is append-only'; END; $$ LANGUAGE plpgsql"""


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REVERSE)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0009_fair_queue")]
    operations = [migrations.RunPython(install, uninstall)]
