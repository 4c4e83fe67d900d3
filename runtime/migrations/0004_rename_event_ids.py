"""``Event.event_id`` → ``Event.uid`` and ``OutboxEntry.event_id`` → ``OutboxEntry.event_uid``.

The string eventId is not a foreign key; in Django ``<fk>_id`` names a primary key, and
``Run.event_id``, ``Proposal.event_id`` and ``JournalEntry.event_id`` are ones. The JSON
key stays ``eventId``; the column and its unique index are renamed in place.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0003_outbox"),
    ]

    operations = [
        migrations.RenameField(model_name="event", old_name="event_id", new_name="uid"),
        migrations.AlterField(
            model_name="event", name="uid", field=models.CharField(max_length=200, unique=True, verbose_name="event id"),
        ),
        migrations.RenameField(model_name="outboxentry", old_name="event_id", new_name="event_uid"),
        migrations.AlterField(
            model_name="outboxentry", name="event_uid",
            field=models.CharField(max_length=200, unique=True, verbose_name="event id"),
        ),
    ]
