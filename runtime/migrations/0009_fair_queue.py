"""The run queue's lanes (docs/design.md §8, fair queue): every run gets ``lane`` —
``loop:<loop>`` for a tick's run, else ``door:<door>`` of its event — and ``QueueLane``
records the turn at which each lane was last served."""

from django.db import migrations, models

CHUNK = 500


def fill_lanes(apps, schema_editor):
    run_model = apps.get_model("runtime", "Run")
    rows = list(run_model.objects.values_list("pk", "loop", "event__door"))
    lanes: dict[str, list[int]] = {}
    for pk, loop, door in rows:
        lanes.setdefault(f"loop:{loop}" if loop else f"door:{door}", []).append(pk)
    for lane, ids in lanes.items():
        for start in range(0, len(ids), CHUNK):
            run_model.objects.filter(pk__in=ids[start:start + CHUNK]).update(lane=lane)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0008_event_key_prefix")]

    operations = [
        migrations.CreateModel(
            name="QueueLane",
            fields=[
                ("lane", models.CharField(max_length=80, primary_key=True, serialize=False)),
                ("turn", models.BigIntegerField()),
            ],
        ),
        migrations.AddField(model_name="run", name="lane", field=models.CharField(default="", max_length=80),
                            preserve_default=False),
        migrations.RunPython(fill_lanes, migrations.RunPython.noop),
    ]
