"""The events' eventId is unique by a named constraint instead of ``unique=True``.

On PostgreSQL ``unique=True`` also kept a ``varchar_pattern_ops`` index for ``LIKE``,
which every admission and every planned event's update paid for; the admin's "events it
caused" now reads the run's outbox rows instead. That index still carries the name it got
when the column was ``event_id``, which Django's ``AlterField`` does not look for, so it
is dropped by name (a no-op on SQLite, which never had it).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runtime", "0012_partial_user_and_link_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="uid",
            field=models.CharField(max_length=200, verbose_name="event id"),
        ),
        migrations.AddConstraint(
            model_name="event",
            constraint=models.UniqueConstraint(fields=("uid",), name="event_uid_unique"),
        ),
        migrations.RunSQL('DROP INDEX IF EXISTS "runtime_event_event_id_dd043043_like"', migrations.RunSQL.noop),
    ]
