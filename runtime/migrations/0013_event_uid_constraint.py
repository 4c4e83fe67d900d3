"""The events' eventId is unique by a named constraint instead of ``unique=True``.

On PostgreSQL ``unique=True`` also kept a ``varchar_pattern_ops`` index for ``LIKE``,
which every admission and every planned event's update paid for; the admin's "events it
caused" reads the run's outbox rows instead. Nothing is rebuilt: on PostgreSQL the
existing unique constraint (named after the column's first name, ``event_id``) is
renamed ``event_uid_unique`` and the pattern index dropped, both at once; on SQLite the
table's own ``UNIQUE`` stays as it is, the same rule, until a later change rebuilds it.
"""

from django.db import migrations, models

#: The unique constraint on the eventId column, whatever it is called, renamed.
RENAME_TO_NAMED = """
DO $$
DECLARE found text;
BEGIN
    SELECT conname INTO found FROM pg_constraint
    WHERE conrelid = 'runtime_event'::regclass AND contype = 'u'
      AND conkey = ARRAY[(SELECT attnum FROM pg_attribute
                          WHERE attrelid = 'runtime_event'::regclass AND attname = 'uid')]::int2[];
    IF found IS NOT NULL AND found <> 'event_uid_unique' THEN
        EXECUTE format('ALTER TABLE runtime_event RENAME CONSTRAINT %I TO event_uid_unique', found);
    END IF;
END $$;
DROP INDEX IF EXISTS "runtime_event_event_id_dd043043_like";
"""

RENAME_BACK = """
ALTER TABLE runtime_event RENAME CONSTRAINT event_uid_unique TO runtime_event_event_id_key;
CREATE INDEX IF NOT EXISTS "runtime_event_event_id_dd043043_like" ON runtime_event (uid varchar_pattern_ops);
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(RENAME_TO_NAMED, None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(RENAME_BACK, None)


class Migration(migrations.Migration):

    dependencies = [
        ("runtime", "0012_partial_user_and_link_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="uid",
                    field=models.CharField(max_length=200, verbose_name="event id"),
                ),
                migrations.AddConstraint(
                    model_name="event",
                    constraint=models.UniqueConstraint(fields=("uid",), name="event_uid_unique"),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
