"""``runtime.instant_loader``: the compiled loader it puts in place of Django's reads the same
instant, in UTC, from every text PostgreSQL may send for a ``timestamptz`` (docs/performance.md)."""

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st


def loaders():
    """(Django's UTC loader, ours), each made as a connection would make it."""
    import psycopg
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.adapt import AdaptersMap
    from psycopg.types.datetime import TimestamptzLoader

    from runtime.instant_loader import _loader_class

    class Context:
        adapters = AdaptersMap(psycopg.adapters)
        connection = None

    Context.adapters.register_loader("timestamptz", TimestamptzLoader)
    register_tzloader(UTC, Context)
    return Context.adapters.get_loader(1184, 0)(1184, None), _loader_class()(1184, None)


def pg_text(moment: datetime, offset: timedelta) -> bytes:
    """``moment`` as PostgreSQL writes a timestamptz in a session whose zone is ``offset`` ahead of UTC."""
    local = moment.astimezone(timezone(offset))
    minutes = abs(int(offset.total_seconds())) // 60
    zone = f"{'-' if offset < timedelta(0) else '+'}{minutes // 60:02d}" + (f":{minutes % 60:02d}" if minutes % 60 else "")
    fraction = f".{local.microsecond:06d}".rstrip("0").rstrip(".")
    return f"{local:%Y-%m-%d %H:%M:%S}{fraction}{zone}".encode()


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.just(UTC)),
    st.integers(min_value=-15 * 60, max_value=15 * 60),
)
def test_the_compiled_loader_reads_what_djangos_loader_reads(moment, offset_minutes):
    django_loader, ours = loaders()
    text = pg_text(moment, timedelta(minutes=offset_minutes))
    assert ours.load(text) == django_loader.load(text) == moment
    assert ours.load(text).tzinfo is UTC


def test_the_first_and_last_instants_and_a_whole_second():
    django_loader, ours = loaders()
    for text, expected in [
        (b"0001-01-01 00:00:00+00", datetime(1, 1, 1, tzinfo=UTC)),
        (b"9999-12-31 23:59:59.999999+00", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
        (b"2026-11-30 21:07:00+00", datetime(2026, 11, 30, 21, 7, tzinfo=UTC)),
    ]:
        assert ours.load(text) == django_loader.load(text) == expected


class FakeAdapters:
    def __init__(self):
        self.registered = []

    def register_loader(self, name, loader):
        self.registered.append((name, loader.__name__))


def fake_connection(*, vendor="postgresql", django_zone=UTC, session_zone="UTC"):
    """Just what ``use_compiled_instant_loader`` reads of a Django connection."""
    from types import SimpleNamespace

    adapters = FakeAdapters()
    raw = SimpleNamespace(adapters=adapters, info=SimpleNamespace(parameter_status=lambda name: session_zone))
    return SimpleNamespace(vendor=vendor, timezone=django_zone, connection=raw), adapters


def test_only_a_utc_session_of_a_utc_django_connection_gets_the_compiled_loader():
    from zoneinfo import ZoneInfo

    from runtime.instant_loader import use_compiled_instant_loader

    for kwargs, expected in [
        ({}, [("timestamptz", "UtcInstantLoader")]),
        ({"session_zone": "Europe/Paris"}, []),  # the compiled loader would answer in Paris time
        ({"django_zone": ZoneInfo("Europe/Paris")}, []),
        ({"vendor": "sqlite"}, []),
    ]:
        connection, adapters = fake_connection(**kwargs)
        use_compiled_instant_loader(sender=None, connection=connection)
        assert adapters.registered == expected, kwargs
