"""The journal is append-only in the database itself (DESIGN §9): triggers refuse UPDATE and DELETE."""

from django.db import migrations

SQLITE = [
    """CREATE TRIGGER IF NOT EXISTS runtime_journal_no_update BEFORE UPDATE ON runtime_journalentry
       BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS runtime_journal_no_delete BEFORE DELETE ON runtime_journalentry
       BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS runtime_journal_no_update",
    "DROP TRIGGER IF EXISTS runtime_journal_no_delete",
]
POSTGRESQL = [
    """CREATE OR REPLACE FUNCTION runtime_journal_refuse() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'the journal is append-only'; END; $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER runtime_journal_no_change BEFORE UPDATE OR DELETE ON runtime_journalentry
       FOR EACH ROW EXECUTE FUNCTION runtime_journal_refuse()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS runtime_journal_no_change ON runtime_journalentry",
    "DROP FUNCTION IF EXISTS runtime_journal_refuse()",
]


def statements(vendor: str, reverse: bool) -> list[str]:
    if vendor == "sqlite":
        return SQLITE_REVERSE if reverse else SQLITE
    if vendor == "postgresql":
        return POSTGRESQL_REVERSE if reverse else POSTGRESQL
    raise RuntimeError(f"no append-only journal trigger for the {vendor} backend")


def install(apps, schema_editor):
    for sql in statements(schema_editor.connection.vendor, reverse=False):
        schema_editor.execute(sql)


def uninstall(apps, schema_editor):
    for sql in statements(schema_editor.connection.vendor, reverse=True):
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0001_initial")]
    operations = [migrations.RunPython(install, uninstall)]
