"""Domain idempotency across doors and the global one-merge barrier (docs/design.md §7.2, §8).

Proposals and runs are unique on the idempotency keys they still hold (``key_released_at``
null), so a released key can be planned again; runs hold their definition's ``barrier``
while claimed, running or interrupted, one per barrier.
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0005_run_interrupted"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="proposal",
            name="barrier",
            field=models.CharField(blank=True, max_length=63, null=True),
        ),
        migrations.AddField(
            model_name="proposal",
            name="key_released_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="barrier",
            field=models.CharField(blank=True, max_length=63, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="key_released_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="proposal",
            name="idempotency_key",
            field=models.CharField(max_length=400),
        ),
        migrations.AlterField(
            model_name="run",
            name="idempotency_key",
            field=models.CharField(max_length=400),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(condition=models.Q(("barrier__isnull", False)), fields=["barrier", "status"], name="run_barrier_idx"),
        ),
        migrations.AddConstraint(
            model_name="proposal",
            constraint=models.UniqueConstraint(condition=models.Q(("key_released_at__isnull", True)), fields=("idempotency_key",), name="proposal_one_per_held_key"),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(condition=models.Q(("key_released_at__isnull", True)), fields=("idempotency_key",), name="run_one_per_held_key"),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(condition=models.Q(("status__in", ("claimed", "running", "interrupted"))), fields=("barrier",), name="run_one_per_barrier"),
        ),
    ]
