"""Instants from PostgreSQL are read by psycopg's compiled loader, and are the values Django's
own loader gives (runtime.instant_loader; docs/performance.md)."""

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from django.db import connection

from runtime.models import Door, Event
from tests.conftest import at

pytestmark = pytest.mark.django_db

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite's instants are Django's own text")


def loader_in_force() -> str:
    """The timestamptz loader of a cursor Django makes (where Django finds the zone not the
    one it wants, it registers its own on the cursor)."""
    with connection.cursor() as cursor:
        return cursor.cursor.adapters.get_loader(1184, 0).__name__


@postgres_only
def test_a_connection_reads_instants_with_the_compiled_loader_and_django_keeps_it():
    assert loader_in_force() == "UtcInstantLoader"
    from psycopg.types.datetime import TimestamptzLoader

    from runtime.instant_loader import _compiled

    assert _compiled(TimestamptzLoader).__module__ == "psycopg_binary._psycopg"


@postgres_only
def test_instants_read_back_exactly_in_utc_through_the_orm_and_a_cursor():
    moment = at("2026-11-30T21:07:00.123456Z")
    event = Event.objects.create(
        uid="instant:1", type="factory.triage.requested", source="test", subject="factory",
        occurred_at=moment, admitted_at=moment + timedelta(microseconds=1), correlation_id="instant:1",
        door=Door.EVENTS, payload={},
    )
    stored = Event.objects.get(pk=event.pk)
    assert (stored.occurred_at, stored.admitted_at) == (moment, moment + timedelta(microseconds=1))
    assert stored.occurred_at.tzinfo is UTC
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz, TIMESTAMPTZ '0001-01-01 00:00:00+00', "
                       "TIMESTAMPTZ '9999-12-31 23:59:59.999999+00', TIMESTAMPTZ '2026-03-29 01:30:00+02'",
                       [datetime(2026, 11, 30, 23, 7, tzinfo=timezone(timedelta(hours=2)))])
        row = cursor.fetchone()
    assert row == (
        datetime(2026, 11, 30, 21, 7, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), datetime(2026, 3, 28, 23, 30, tzinfo=UTC),
    )
    assert all(value.tzinfo is UTC for value in row)


class StandInConnection:
    """What ``use_compiled_instant_loader`` reads of a Django connection, recording the loaders
    registered on its driver connection."""

    def __init__(self, vendor: str, django_zone=UTC, session_zone: str = "UTC"):
        self.vendor, self.timezone, self.registered = vendor, django_zone, []
        self.connection = SimpleNamespace(
            info=SimpleNamespace(parameter_status={"TimeZone": session_zone}.get),
            adapters=SimpleNamespace(register_loader=lambda name, loader: self.registered.append((name, loader.__name__))),
        )


@pytest.mark.parametrize("vendor, django_zone, session_zone", [
    ("sqlite", UTC, "UTC"),
    ("postgresql", timezone(timedelta(hours=1)), "UTC"),
    ("postgresql", UTC, "Europe/Paris"),
], ids=["sqlite", "django-zone-not-utc", "session-zone-not-utc"])
def test_a_connection_not_utc_on_both_sides_or_not_postgresql_keeps_djangos_loader(vendor, django_zone, session_zone):
    from runtime.instant_loader import use_compiled_instant_loader

    stand_in = StandInConnection(vendor, django_zone, session_zone)
    use_compiled_instant_loader(sender=None, connection=stand_in)
    assert stand_in.registered == []


@postgres_only
def test_a_postgresql_connection_utc_on_both_sides_gets_the_compiled_loader():
    from runtime.instant_loader import use_compiled_instant_loader

    stand_in = StandInConnection("postgresql")
    use_compiled_instant_loader(sender=None, connection=stand_in)
    assert stand_in.registered == [("timestamptz", "UtcInstantLoader")]

