"""The user and link foreign keys are indexed only where set (docs/performance.md).

A journal entry of an admission, a NOOP or a refusal links no proposal and no run, and an
auto-approved proposal or run has no user: the full indexes Django gives a foreign key held
an entry for each of those nulls, written with every row of a burst and read by nothing.
Each becomes a partial index ``WHERE <column> IS NOT NULL``, which every lookup by the key
(``= …``, ``IN (…)``, PROTECT's check, the database's own foreign-key check) still uses.

The old indexes are dropped by name rather than through ``AlterField``: on SQLite that
would rebuild the tables, and a rebuilt journal table loses its append-only triggers.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

#: (table, column, Django's name for the foreign key's full index).
FULL_INDEXES = [
    ("runtime_journalentry", "proposal_id", "runtime_journalentry_proposal_id_fe5db28d"),
    ("runtime_journalentry", "run_id", "runtime_journalentry_run_id_d1791fff"),
    ("runtime_proposal", "decided_by_id", "runtime_proposal_decided_by_id_fecc9da9"),
    ("runtime_run", "approved_by_id", "runtime_run_approved_by_id_9444a04b"),
]


class Migration(migrations.Migration):

    dependencies = [
        ('runtime', '0011_event_plain_indexes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{name}"', reverse_sql=f'CREATE INDEX "{name}" ON "{table}" ("{column}")')
                for table, column, name in FULL_INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='journalentry',
                    name='proposal',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='journal', to='runtime.proposal'),
                ),
                migrations.AlterField(
                    model_name='journalentry',
                    name='run',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='journal', to='runtime.run'),
                ),
                migrations.AlterField(
                    model_name='proposal',
                    name='decided_by',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='run',
                    name='approved_by',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name='journalentry',
            index=models.Index(condition=models.Q(('proposal__isnull', False)), fields=['proposal'], name='journal_proposal_idx'),
        ),
        migrations.AddIndex(
            model_name='journalentry',
            index=models.Index(condition=models.Q(('run__isnull', False)), fields=['run'], name='journal_run_idx'),
        ),
        migrations.AddIndex(
            model_name='proposal',
            index=models.Index(condition=models.Q(('decided_by__isnull', False)), fields=['decided_by'], name='proposal_decided_by_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('approved_by__isnull', False)), fields=['approved_by'], name='run_approved_by_idx'),
        ),
    ]
