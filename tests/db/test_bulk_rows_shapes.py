"""``bulk_rows`` beyond the planner's tables (docs/performance.md): ``one_of`` without ``negate``
selects among its values, and a field ``insert_rows`` does not send as it is (a float) is
prepared as the field prepares it."""

import pytest
from django.db import connection, transaction

from ops.models import ProcessRecord
from runtime.models import Event
from runtime.services.bulk_rows import insert_rows, one_of
from tests.conftest import at
from tests.helpers import inject

pytestmark = pytest.mark.django_db


def test_one_of_selects_the_rows_among_the_values_unless_told_to_negate():
    """``negate`` defaults to false: the rows whose column is one of the values."""
    for event_id in ("a", "b", "c"):
        inject(event_id, "factory.triage.requested", {"repo": "alpha"})
    quote = connection.ops.quote_name
    condition, params = one_of(quote("uid"), ["c", "a"])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT uid FROM {quote(Event._meta.db_table)} WHERE {condition} ORDER BY uid", params)
        assert [row[0] for row in cursor.fetchall()] == ["a", "c"]


def test_a_float_field_is_sent_as_its_field_prepares_it():
    """A ``FloatField`` (neither an instant, JSON nor plain text, number or boolean) is prepared
    by its field: the text ``"0.25"`` is stored as the number 0.25, the row read back as saved."""
    started = at("2026-11-30T21:00:00Z")
    with transaction.atomic():
        ids = insert_rows(ProcessRecord, [{
            "role": "worker", "host": "h1", "pid": 41, "started_at": started, "last_seen_at": started,
            "clock_offset_seconds": "0.25",
        }], key="pid")
    record = ProcessRecord.objects.get()
    assert ids == {41: record.pk}
    assert (record.role, record.host, record.pid, record.started_at, record.clock_offset_seconds) == (
        "worker", "h1", 41, started, 0.25)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT clock_offset_seconds FROM {ProcessRecord._meta.db_table}")
        assert cursor.fetchall() == [(0.25,)]
