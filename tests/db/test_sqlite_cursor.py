"""``runtime.sqlite_backend.cursor``: a statement's ``%s`` → ``?`` rewrite is Django's, done
once per statement text and looked up after (docs/performance.md, "Planning")."""

import pytest
from django.db import connection

from runtime.sqlite_backend import cursor as remembering

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's cursor")


@pytest.mark.django_db
def test_a_statement_is_rewritten_as_django_rewrites_it_and_answers_the_same():
    remembering._qmark.cache_clear()
    sql = "SELECT %s, %s || '%%', '100%%s' WHERE %s = 1"
    with connection.cursor() as cursor:
        assert type(cursor.cursor) is remembering.RememberingCursor
        cursor.execute(sql, ["a", "b", 1])
        assert cursor.fetchall() == [("a", "b%", "100%s")]
    assert remembering._qmark(sql) == "SELECT ?, ? || '%', '100%s' WHERE ? = 1"


@pytest.mark.django_db
def test_a_repeated_statement_is_looked_up_not_rewritten_again():
    remembering._qmark.cache_clear()
    sql = "SELECT " + ", ".join(["%s"] * 500)
    with connection.cursor() as cursor:
        for first in (0, 500):
            cursor.execute(sql, list(range(first, first + 500)))
            assert cursor.fetchone() == tuple(range(first, first + 500))
    info = remembering._qmark.cache_info()
    assert (info.hits, info.misses) == (1, 1)


@pytest.mark.django_db
def test_named_parameters_are_still_rewritten_by_django():
    with connection.cursor() as cursor:
        cursor.execute("SELECT %(a)s, %(b)s", {"a": 1, "b": "x"})
        assert cursor.fetchone() == (1, "x")
