"""``ScheduleState.loop`` is unique through a named constraint, without PostgreSQL's second,
pattern-ops index for LIKE 'prefix%' that ``unique=True`` adds and nothing asks: every
tick's state update wrote an entry into it (docs/performance.md).

On PostgreSQL the pattern index is dropped and the unique constraint renamed, so no index is
rebuilt; on SQLite, which never had a pattern index, the table keeps its column's UNIQUE
(``AlterField`` would rebuild the table for nothing).
"""

from django.db import migrations, models

LIKE_INDEX = "schedules_schedulestate_loop_3df8abe0_like"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX IF EXISTS "{LIKE_INDEX}"')
        schema_editor.execute(
            'ALTER TABLE "schedules_schedulestate" RENAME CONSTRAINT "schedules_schedulestate_loop_key" '
            'TO "schedule_state_one_per_loop"'
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            'ALTER TABLE "schedules_schedulestate" RENAME CONSTRAINT "schedule_state_one_per_loop" '
            'TO "schedules_schedulestate_loop_key"'
        )
        schema_editor.execute(f'CREATE INDEX "{LIKE_INDEX}" ON "schedules_schedulestate" ("loop" varchar_pattern_ops)')


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0006_slot_loop_iteration_seconds'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.AlterField(
                    model_name='schedulestate',
                    name='loop',
                    field=models.CharField(max_length=63),
                ),
                migrations.AddConstraint(
                    model_name='schedulestate',
                    constraint=models.UniqueConstraint(fields=('loop',), name='schedule_state_one_per_loop'),
                ),
            ],
        ),
    ]
