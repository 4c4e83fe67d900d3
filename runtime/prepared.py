"""Statements the hot paths repeat, prepared once per PostgreSQL connection (docs/performance.md).

Django's PostgreSQL backend binds parameters on the client and never prepares, so the
server plans every statement anew. For the idle check (``schedules.due_check``) planning
took three times as long as answering (0.21 ms against 0.06 ms); a signed door's group
insert (``runtime.services.admission``), a statement of common table expressions over one
JSON parameter, cost the server 430 µs of CPU for a group of one, 290 µs once prepared.
``prepared_cursor``
gives a cursor that binds on the server and prepares each statement the first time this
connection runs it (psycopg's protocol-level prepared statements, which PgBouncer 1.21
and later keeps per client with ``max_prepared_statements``); later executions skip the
planning. It is wrapped as Django wraps its own cursors, so ``execute_wrapper`` hooks
see its statements. On SQLite, and where queries are logged, it is the ordinary cursor
(SQLite's driver already keeps compiled statements).

Its users: the idle check and the slot loop's lease and status rows, the doors' group
insert, and a planning chunk's statements (its claim, the held keys and singletons, the
inserts of ``bulk_rows.insert_rows`` and ``journal.record_values``, the events' update).
Each has one text whatever its number of rows (rows travel as one JSON parameter, a set of
ids as one array), so a connection prepares it once.

Only for statements whose parameters have one type each time (an instant, a name, a JSON
text, an array of ids): a server-bound parameter is typed by its Python value, not quoted
into the text; psycopg prepares a statement again for another set of types (an array of
small ids is ``int2[]``, of larger ones ``int4[]`` or ``int8[]``).
"""

import functools
import sys

from django.db import connection
from django.db.backends.utils import CursorWrapper

from .clock import sql_instant


def prepared_cursor() -> CursorWrapper:
    """A cursor of the default connection whose ``execute`` prepares its statement on
    PostgreSQL (see the module); use it as a context manager, like ``connection.cursor()``."""
    if connection.vendor != "postgresql" or connection.queries_logged:
        # Logged queries (DEBUG, a test capturing them) show each statement with its values,
        # which Django reads only from the cursors it makes.
        return connection.cursor()
    # As Django's own cursors: a connection not checked since it was handed out (a request's
    # or a loop's start, ``CONN_HEALTH_CHECKS``) is checked, and replaced if it died.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        # Django turns preparing off (None); a threshold no statement reaches turns it back
        # on for cursors that ask (``prepare=True``) and for no other: Django's own cursors
        # bind on the client, and psycopg never prepares those.
        raw.prepare_threshold = sys.maxsize
    cursor = _preparing_cursor_class()(raw)
    return connection.make_cursor(cursor)


@functools.cache
def _preparing_cursor_class():
    # Imported here: a SQLite installation never loads the PostgreSQL driver.
    import psycopg

    class PreparingCursor(psycopg.Cursor):
        """A server-binding cursor that prepares every statement it runs."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True, binary=binary)

    return PreparingCursor


def instant_param(value):
    """An aware instant (or None) as a parameter of this connection's plain-SQL statements:
    the stored form Django gives a ``DateTimeField`` (``runtime.clock.sql_instant``)."""
    return None if value is None else sql_instant(value, connection.vendor)
