"""Keys that were an event's bare eventId become ``eventId:<eventId>`` (docs/design.md §7.2),
so that an outside eventId shaped like ``<loop>:<slot>`` no longer holds a tick's key."""

from django.db import migrations
from django.db.models import F, Value
from django.db.models.functions import Concat

PREFIX = "eventId:"


def prefix_event_keys(apps, schema_editor):
    for name in ("Proposal", "Run"):
        model = apps.get_model("runtime", name)
        bare = model.objects.filter(idempotency_key=F("event__uid"))
        ids = list(bare.values_list("pk", flat=True))
        for start in range(0, len(ids), 500):
            model.objects.filter(pk__in=ids[start:start + 500]).update(
                idempotency_key=Concat(Value(PREFIX), F("idempotency_key"))
            )


def strip_event_keys(apps, schema_editor):
    for name in ("Proposal", "Run"):
        model = apps.get_model("runtime", name)
        prefixed = model.objects.filter(idempotency_key=Concat(Value(PREFIX), F("event__uid")))
        for pk, uid in prefixed.values_list("pk", "event__uid"):
            model.objects.filter(pk=pk).update(idempotency_key=uid)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0007_journal_truncate_guard")]
    operations = [migrations.RunPython(prefix_event_keys, strip_event_keys)]
