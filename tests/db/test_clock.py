"""The database's clock is the one clock (docs/operations.md)."""

from datetime import UTC, datetime, timedelta

import pytest

from runtime.clock import database_now

pytestmark = pytest.mark.django_db


def test_database_now_is_aware_utc_and_reads_the_database():
    now = database_now()
    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


def test_database_now_moves_forward():
    first = database_now()
    second = database_now()
    assert second >= first
