"""The database's clock is the one clock (docs/operations.md)."""

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from runtime import clock
from runtime.clock import database_now

pytestmark = pytest.mark.django_db


def test_database_now_is_aware_utc_and_reads_the_database():
    now = database_now()
    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


def test_database_now_moves_forward():
    # Two readings 5 ms apart differ on both databases (SQLite reads milliseconds, PostgreSQL
    # microseconds): a reading frozen or cached would be equal.
    first = database_now()
    time.sleep(0.005)
    second = database_now()
    assert second > first
    assert second - first < timedelta(seconds=5)


def test_recent_database_now_reuses_a_reading_younger_than_a_second_and_advances_it(django_assert_num_queries, monkeypatch):
    monotonic = [1000.0]
    monkeypatch.setattr(clock.time, "monotonic", lambda: monotonic[0])
    with django_assert_num_queries(1):
        first = clock.recent_database_now()
    monotonic[0] += 0.25
    with django_assert_num_queries(0):
        second = clock.recent_database_now()
    assert second - first == timedelta(seconds=0.25)
    monotonic[0] += clock.READING_MAX_AGE_SECONDS
    with django_assert_num_queries(1):
        third = clock.recent_database_now()
    assert third.tzinfo is UTC and third >= first


def test_recent_database_now_reads_again_after_forget_reading_or_a_monotonic_clock_gone_back(
    django_assert_num_queries, monkeypatch,
):
    monotonic = [1000.0]
    monkeypatch.setattr(clock.time, "monotonic", lambda: monotonic[0])
    clock.recent_database_now()
    clock.forget_reading()
    with django_assert_num_queries(1):
        clock.recent_database_now()
    monotonic[0] -= 5
    with django_assert_num_queries(1):
        clock.recent_database_now()


@pytest.mark.parametrize("value", [
    datetime(2026, 12, 7, 1, 40, 23, 883000, tzinfo=UTC),
    datetime(2026, 12, 7, 1, 40, 23, tzinfo=UTC),  # no fraction: str() leaves it out, as Django does
    datetime(2026, 12, 7, 3, 40, 23, 1, tzinfo=timezone(timedelta(hours=2))),
])
def test_sql_instant_is_the_parameter_django_would_pass_for_a_datetime_field(value):
    from django.db import connection
    from django.db.models import DateTimeField

    from runtime.prepared import instant_param

    assert clock.sql_instant(value, connection.vendor) == DateTimeField().get_db_prep_value(value, connection)
    assert instant_param(value) == clock.sql_instant(value, connection.vendor) and instant_param(None) is None
