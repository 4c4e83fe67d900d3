"""``LoopChange``: each loop's enable/disable history, which the earning report reads
(docs/schedules.md, "Earning auto").

Seeded from the states: each loop enabled now gets one ``enabled`` change at its
``enabledSince`` (when the slot loop last saw it turned on, and it has stayed on since). A
disabled loop gets none: when it was disabled was not kept, and it earns nothing while off.
"""

from django.db import migrations, models


def seed(apps, schema_editor):
    state, change = apps.get_model("schedules", "ScheduleState"), apps.get_model("schedules", "LoopChange")
    enabled = state.objects.filter(enabled=True, enabled_since__isnull=False).values_list("loop", "enabled_since")
    change.objects.bulk_create([change(loop=loop, at=since, kind="enabled") for loop, since in enabled.iterator()], batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ('schedules', '0007_state_loop_plain_unique'),
    ]

    operations = [
        migrations.CreateModel(
            name='LoopChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('loop', models.CharField(max_length=63)),
                ('at', models.DateTimeField()),
                ('kind', models.CharField(choices=[('enabled', 'Enabled'), ('disabled', 'Disabled')], max_length=16)),
            ],
            options={
                'ordering': ['loop', 'at', 'id'],
                'indexes': [models.Index(fields=['loop', 'at', 'id'], name='loop_change_idx')],
            },
        ),
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
