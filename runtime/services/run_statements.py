"""A run's claim, its start, and its quiet finish, as one PostgreSQL statement each
(docs/performance.md, "Statements per operation").

``runs.start_run`` and ``runs.finish_run`` are a compare-and-swap ``UPDATE`` of the run and
its journal entry at an instant the worker read from the database: on PostgreSQL, through
Django, a ``BEGIN``, the two statements and the ``COMMIT``, four round trips each. Here the
two are common table expressions of one statement, prepared once per connection
(``runtime.prepared``), which commits itself: one round trip. The claim's pick (``FOR UPDATE
SKIP LOCKED``), update, lane and entry are one statement too, in the claim's durable
transaction (three round trips instead of six). A quick command's run went from 17 round trips
to 8 (the worker's clock readings stay: the tests pin them, and the journal's instants are the
ones the worker acted on). The rows written are those of the ORM's path: the same columns, and
the entry ``journal.record`` would write (its ``data`` the same JSON document).

A finish is quiet when it only records the run's end: it succeeded, chains nothing and
releases no key (``runs.finish_run`` decides, and writes every other finish through the ORM).
"""

import json
from datetime import datetime

from django.db import IntegrityError, connection

from runtime.adapters.base import RunResult
from runtime.models import Actor, JournalEntry, QueueLane, Run, RunStatus
from runtime.prepared import prepared_cursor

from .journal import COLUMNS as JOURNAL_COLUMNS
from .queue import claimable_query


def _instant_and_journal(action: str, data: str = "%s::jsonb") -> tuple[str, str]:
    """The statement's instant (a parameter) as the CTE ``c``, and the journal insert of one
    ``action`` entry of the system per run updated in ``u``, its data the SQL ``data`` (default:
    a parameter)."""
    quote = connection.ops.quote_name
    journal = (
        f"j AS (INSERT INTO {quote(JournalEntry._meta.db_table)} ({', '.join(quote(c) for c in JOURNAL_COLUMNS)}) "
        f"SELECT (SELECT t FROM c), '{action}', '{Actor.SYSTEM.value}', '', u.{quote('event_id')}, NULL, "
        f"u.{quote('id')}, {data} FROM u)"
    )
    return "c AS (SELECT %s::timestamptz AS t)", journal


def _run_updated(sql: str, params: list) -> bool:
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0] == 1


def start_in_one_statement(run: Run, *, worker: str, now: datetime) -> bool:
    """``claimed → running`` of ``run`` held by ``worker`` at ``now``, journaled ``run_started``
    ``{worker, attempt}``; False when the lease was lost."""
    quote = connection.ops.quote_name
    clock, journal = _instant_and_journal("run_started")
    sql = (
        f"WITH {clock}, u AS (UPDATE {quote(Run._meta.db_table)} SET {quote('status')} = %s, "
        f"{quote('started_at')} = (SELECT t FROM c) "
        f"WHERE {quote('id')} = %s AND {quote('status')} = %s AND {quote('worker')} = %s "
        f"RETURNING {quote('id')}, {quote('event_id')}), {journal} SELECT count(*) FROM u"
    )
    data = json.dumps({"worker": worker, "attempt": run.attempt})
    return _run_updated(sql, [now, RunStatus.RUNNING.value, run.pk, RunStatus.CLAIMED.value, worker, data])


def finish_in_one_statement(run: Run, result: RunResult, *, worker: str, now: datetime) -> bool:
    """``running → succeeded`` of ``run`` held by ``worker`` at ``now`` with ``result``, journaled
    ``run_succeeded`` ``{outcome, reason, exitCode, …extra}``, for a quiet finish (the module's
    docstring); False when the lease was lost."""
    quote = connection.ops.quote_name
    clock, journal = _instant_and_journal(f"run_{RunStatus.SUCCEEDED.value}")
    columns = ("outcome", "reason", "summary", "exit_code", "stdout_path")
    sql = (
        f"WITH {clock}, u AS (UPDATE {quote(Run._meta.db_table)} SET {quote('status')} = %s, "
        f"{quote('finished_at')} = (SELECT t FROM c), {quote('lease_expires_at')} = NULL, "
        + "".join(f"{quote(column)} = %s, " for column in columns)
        + f"{quote('result_data')} = %s::jsonb "
        f"WHERE {quote('id')} = %s AND {quote('status')} = %s AND {quote('worker')} = %s "
        f"RETURNING {quote('id')}, {quote('event_id')}), {journal} SELECT count(*) FROM u"
    )
    data = json.dumps({"outcome": result.outcome, "reason": result.reason, "exitCode": result.exit_code, **result.extra})
    return _run_updated(sql, [
        now, RunStatus.SUCCEEDED.value, result.outcome, result.reason, result.summary, result.exit_code,
        result.stdout_path, None if result.data is None else json.dumps(result.data),
        run.pk, RunStatus.RUNNING.value, worker, data,
    ])


#: The constraint a claim breaks when another worker took its barrier between the claim's
#: snapshot and its update (``runtime.models.Run``).
BARRIER_CONSTRAINT = "run_one_per_barrier"


def claim_in_one_statement(*, worker: str, now: datetime, lease_until: datetime) -> Run | None:
    """The next claimable run (``queue.claimable_query``, its row locked ``FOR UPDATE SKIP
    LOCKED``) claimed by ``worker`` at ``now`` until ``lease_until``, its lane served and
    ``run_claimed`` journaled with ``{worker, attempt}``, as one statement; the run as stored,
    or None when none is claimable. Call inside the claim's transaction. Raises
    ``IntegrityError`` when another worker took the run's barrier meanwhile (the constraint
    ``BARRIER_CONSTRAINT``)."""
    quote = connection.ops.quote_name
    runs, lanes = quote(Run._meta.db_table), quote(QueueLane._meta.db_table)
    clock, journal = _instant_and_journal("run_claimed", "jsonb_build_object('worker', %s::text, 'attempt', u.attempt)")
    sql = (
        f"WITH {clock}, p AS ({claimable_query(lock=True)}), "
        f"u AS (UPDATE {runs} AS run SET status = %s, attempt = run.attempt + 1, claimed_at = (SELECT t FROM c), "
        f"lease_expires_at = %s, worker = %s FROM p WHERE run.id = p.id RETURNING run.*), "
        f"l AS (INSERT INTO {lanes} (lane, turn) SELECT p.lane, (SELECT COALESCE(MAX(turn), 0) + 1 FROM {lanes}) "
        f"FROM p ON CONFLICT (lane) DO UPDATE SET turn = EXCLUDED.turn), "
        f"{journal} SELECT * FROM u"
    )
    params = [now, RunStatus.CLAIMED.value, lease_until, worker, worker]
    return next(iter(Run.objects.raw(sql, params)), None)


def broke_barrier_constraint(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a claim's lost race for a barrier (``BARRIER_CONSTRAINT``)."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == BARRIER_CONSTRAINT
