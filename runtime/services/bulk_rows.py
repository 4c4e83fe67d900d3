"""Rows of a multi-row statement sent to PostgreSQL as one JSON parameter (docs/performance.md).

Django's psycopg backend binds parameters on the client: each one is quoted into the
statement's text. A batch of 1,000 rows as one array per column is 16 array literals,
every element escaped one by one — about 15 ms of client CPU for a column of JSON
payloads, most of a tick burst's time. One JSON text holding every row, a list of lists
(``json_rows``), is a single string to quote; the server parses it once as ``jsonb`` and
reads each row's values by position, cast to its column's declared type (timestamptz,
jsonb, …: ``populated``). Rows as objects keyed by column name, read with
``json_populate_recordset``, cost about three times as much on each side: the client
builds a dict a row and writes every name, the server matches them by name.
SQLite has no such need: its driver binds each parameter natively.
"""

import functools
import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from django.db import connection, models

from runtime.prepared import prepared_cursor


def _as_json(value):
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a row value")


def json_rows(rows: Sequence[Sequence]) -> str:
    """``rows`` (each a sequence of values) as one JSON text, a list of lists. Values are
    text, numbers, booleans, null, timezone-aware instants (ISO 8601 text) or, for a JSON
    column, the document itself (a dict or list). Raises ``TypeError`` for anything else."""
    return json.dumps(rows, default=_as_json, separators=(",", ":"))


def typed_rows(columns: Sequence[tuple[str, str]], alias: str) -> str:
    """The FROM item ``(SELECT … FROM jsonb_array_elements(%s::jsonb) …) AS alias`` with one
    column per ``(name, SQL type)`` of ``columns``: the rows of one ``json_rows`` parameter,
    value ``n`` of each row cast to the ``n``-th type. A JSON null is SQL NULL, in a jsonb
    column too. PostgreSQL only."""
    quote = connection.ops.quote_name
    picked = ", ".join(
        (f"NULLIF(e -> {n}, 'null'::jsonb)" if kind == "jsonb" else f"(e ->> {n})::{kind}") + f" AS {quote(name)}"
        for n, (name, kind) in enumerate(columns)
    )
    return f"(SELECT {picked} FROM jsonb_array_elements(%s::jsonb) AS e) AS {alias}"


def populated(table: str, columns: Sequence[str], alias: str) -> str:
    """``typed_rows`` of ``table``'s ``columns``, each cast to its declared type without its
    length (``character varying``, not ``(200)``): an explicit cast to a length would cut a
    value short, while the assignment to the column refuses it. PostgreSQL only."""
    types = column_types(table)
    return typed_rows([(column, types[column]) for column in columns], alias)


def recordset(table: str, columns: Sequence[str], rows: Sequence[Sequence], alias: str) -> tuple[str, list]:
    """``(sql, params)`` of ``populated(table, columns, alias)`` holding ``rows`` (``json_rows``):
    select ``alias.column`` from it. PostgreSQL only."""
    return populated(table, columns, alias), [json_rows(rows)]


def column_types(table: str) -> dict[str, str]:
    """``{column: SQL type}`` of ``table`` as the catalog declares it (no length), read once
    per database and table for the life of the process. PostgreSQL only."""
    return _column_types(connection.settings_dict["NAME"], table)


@functools.lru_cache(maxsize=64)
def _column_types(database: str, table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [connection.ops.quote_name(table)],
        )
        return dict(cursor.fetchall())


def one_of(column: str, values: Sequence, *, negate: bool = False) -> tuple[str, list]:
    """``(condition, params)``: the SQL ``column`` (already quoted) is one of ``values`` (or,
    ``negate``, none of them). On PostgreSQL ``= ANY(%s)`` / ``<> ALL(%s)`` with the values
    as one array parameter: psycopg's client-side binding parses every placeholder of an
    ``IN`` list, about 30 ms for a chunk's 500 (docs/performance.md). On SQLite
    ``IN (%s, …)``, which its driver binds natively. ``values`` must not be empty."""
    if backend_vendor() == "postgresql":
        return f"{column} {'<> ALL' if negate else '= ANY'}(%s)", [list(values)]
    return f"{column} {'NOT IN' if negate else 'IN'} ({', '.join(['%s'] * len(values))})", list(values)


#: Most rows one ``insert_rows`` statement carries.
INSERT_ROWS = 500


def insert_rows(model, rows: list[dict], *, key: str) -> dict:
    """Insert rows of ``model`` with one multi-row ``INSERT … RETURNING id, key`` per
    ``INSERT_ROWS`` (SQLite: ``VALUES``; PostgreSQL: ``json_rows``) and return
    ``{row[key]: id}`` for the unique column ``key`` (``event_id`` of a proposal,
    ``proposal_id`` of a run), so the order the database returns rows in does not matter.

    Each row is a dict by field attname (``event_id``, not ``event``), values as the model
    holds them; a field a row leaves out takes its default, or NULL where it has none and
    may be null (``KeyError`` for any other). ``bulk_create`` without building a model
    instance per row or compiling SQL per value, which were most of a planning chunk's
    time (docs/performance.md). Raises ``IntegrityError`` when a constraint refuses a row
    (the whole statement is refused); call inside the caller's transaction.
    """
    if not rows:
        return {}
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    defaults = {field.attname: field.get_default() for field in fields if field.has_default() or field.null}
    names = [field.attname for field in fields]
    columns = [field.column for field in fields]
    postgres = backend_vendor() == "postgresql"
    prepare = [(name, prep) for field, name in zip(fields, names, strict=True)
               if (prep := _preparer(field, postgres)) is not _same]
    quote = connection.ops.quote_name
    table = model._meta.db_table
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) "
    tail = f" RETURNING {quote(model._meta.pk.column)}, {quote(model._meta.get_field(key).column)}"
    size = INSERT_ROWS if postgres else max(1, min(INSERT_ROWS, _sqlite_variable_limit() // len(columns)))
    ids = {}
    with prepared_cursor() as cursor:
        for first in range(0, len(rows), size):
            chunk = []
            for row in rows[first:first + size]:
                values = {**defaults, **row}
                if len(values) != len(names):
                    raise KeyError(_mismatch(values, names))
                for name, prep in prepare:
                    values[name] = prep(values[name])
                chunk.append(values)
            if postgres:
                params = [json_rows([[values[name] for name in names] for values in chunk])]
                cursor.execute(
                    f"{head}SELECT {', '.join(f'r.{quote(c)}' for c in columns)} FROM {populated(table, columns, 'r')}{tail}",
                    params,
                )
            else:
                placeholder = "(" + ", ".join(["%s"] * len(columns)) + ")"
                cursor.execute(f"{head}VALUES {', '.join([placeholder] * len(chunk))}{tail}",
                               [values[name] for values in chunk for name in names])
            ids.update((found, pk) for pk, found in cursor.fetchall())
    return ids


def _mismatch(values: dict, names: list[str]) -> str:
    """What a row that does not hold exactly ``names`` is missing or has besides them."""
    missing = [name for name in names if name not in values]
    return missing[0] if missing else f"unknown fields: {sorted(set(values) - set(names))}"


def _preparer(field, postgres: bool):
    """How ``insert_rows`` sends ``field``'s values: instants adapted once per distinct
    value, JSON as text on SQLite and as the document on PostgreSQL (``json_rows``), text,
    numbers and booleans as they are; anything else as its field prepares it."""
    if isinstance(field, models.DateTimeField):
        return stored_instant
    if isinstance(field, models.JSONField):
        return _same if postgres else (lambda value: value if value is None or type(value) is JSONText
                                       else json.dumps(value, cls=field.encoder))
    if isinstance(field, _PLAIN_FIELDS):
        return _same
    return lambda value: field.get_db_prep_save(value, connection)


class JSONText(str):
    """A JSON column's value already encoded as SQLite stores it (``json.dumps`` of the
    document, the field's encoder being the default): ``insert_rows`` stores it as it is.
    SQLite only; on PostgreSQL a JSON column's value is the document itself."""


def _same(value):
    return value


def stored_instant(value: datetime | None):
    """An instant as this connection's multi-row statements send it: on SQLite the text a
    ``DateTimeField`` stores, on PostgreSQL its ISO 8601 text (what ``json_rows`` would
    write for it, so the encoder calls no fallback per value; as a plain parameter the
    server reads it as a ``timestamptz``). Remembered per backend: a batch shares a few
    instants (its ``now``, its slots)."""
    return _stored_instant(value, backend_vendor())


@functools.lru_cache(maxsize=4096)
def _stored_instant(value: datetime | None, vendor: str):
    if value is None:
        return None
    if vendor == "postgresql":
        return value.isoformat()
    return connection.ops.adapt_datetimefield_value(value)


def instant_reader():
    """A function from an instant as this connection's cursor returns it to an aware UTC
    ``datetime`` (None stays None), the counterpart of ``stored_instant`` for rows read with
    plain SQL: PostgreSQL's driver already gives instants; on SQLite each distinct stored
    value is converted once (a chunk's rows share a few slots)."""
    if connection.vendor == "postgresql":
        return lambda value: value
    seen: dict = {None: None}
    convert = connection.ops.convert_datetimefield_value

    def read(value):
        found = seen.get(value, seen)
        if found is seen:
            found = seen[value] = convert(value, None, connection)
        return found

    return read


@functools.cache
def backend_vendor() -> str:
    """``connection.vendor`` of the default database, read once: its backend is fixed by the
    settings for the life of the process, and the proxy's lookup per value was a tenth of
    a planning chunk's client time (docs/performance.md)."""
    return connection.vendor


_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField, models.ForeignKey)


def _sqlite_variable_limit() -> int:
    """SQLite's bound-variable limit of this connection (999 before 3.32, 32,766 since)."""
    connection.ensure_connection()
    return connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
