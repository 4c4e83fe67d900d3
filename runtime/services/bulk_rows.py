"""Rows of a multi-row statement sent to PostgreSQL as one JSON parameter (docs/performance.md).

Django's psycopg backend binds parameters on the client: each one is quoted into the
statement's text. A batch of 1,000 rows as one array per column is 16 array literals,
every element escaped one by one — about 15 ms of client CPU for a column of JSON
payloads, most of a tick burst's time. One JSON text holding every row is a single
string to quote, and the server reads it with ``json_populate_recordset`` into the
table's own row type, so each column keeps its declared type (timestamptz, jsonb, …).
SQLite has no such need: its driver binds each parameter natively.
"""

import json
from collections.abc import Sequence
from datetime import datetime

from django.db import connection


def _as_json(value):
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a row value")


def json_rows(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    """``rows`` (one value a column, in ``columns``' order) as the JSON text of a list of
    objects by column name. Values are text, numbers, booleans, null, timezone-aware
    instants (ISO 8601 text) or, for a JSON column, the document itself (a dict or list).
    Raises ``TypeError`` for anything else."""
    return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], default=_as_json, separators=(",", ":"))


def recordset(table: str, columns: Sequence[str], rows: Sequence[Sequence], alias: str) -> tuple[str, list]:
    """``(sql, params)`` of a FROM item ``json_populate_recordset(NULL::table, %s) AS alias``
    holding ``rows`` (``json_rows``): select ``alias.column`` from it. PostgreSQL only."""
    quote = connection.ops.quote_name
    return f"json_populate_recordset(NULL::{quote(table)}, %s) AS {alias}", [json_rows(columns, rows)]
