"""The fair run queue: which queued run a worker claims next (docs/design.md §8, "Fair queue").

Every run belongs to a **lane**: its loop's (``loop:<loop>``) for a tick's run, else its
event's door's (``door:github``, ``door:events``, ``door:inject``, ``door:chain``). A claim
takes the oldest claimable run of the lane served longest ago — a lane never served
first, ties to the oldest run — and then marks its lane served at a new turn (one more
than the highest so far). So claims go round-robin across the lanes that have work,
oldest first within each: a heartbeat run queued behind 5,000 webhook runs is the next
one claimed, not the 5,001st.

The claim primitives stay those of ``runtime.services.runs.claim_next_run`` (``FOR UPDATE
SKIP LOCKED`` on PostgreSQL, a compare-and-swap update elsewhere) and the barrier rule
that of ``runtime.services.barriers``: a run whose barrier is held is not claimable, and
its lane's next run is.
"""

from django.db import connection

from runtime.models import QueueLane, Run, RunStatus

from .barriers import barrier_free_sql


def claimable_query(*, lock: bool) -> str:
    """The SQL of ``next_claimable`` (no parameters)."""
    runs = connection.ops.quote_name(Run._meta.db_table)
    lanes = connection.ops.quote_name(QueueLane._meta.db_table)
    # 'queued' is a literal, as the partial index run_queued_idx states it: SQLite uses a
    # partial index only when the query repeats its condition, which a parameter never does.
    sql = (
        f"SELECT run.id, run.lane FROM {runs} run LEFT JOIN {lanes} lane ON lane.lane = run.lane "
        f"WHERE run.status = '{RunStatus.QUEUED.value}' AND {barrier_free_sql('run')} "
        "ORDER BY COALESCE(lane.turn, 0), run.id LIMIT 1"
    )
    return sql + (" FOR UPDATE OF run SKIP LOCKED" if lock else "")


def next_claimable(*, lock: bool) -> tuple[int, str] | None:
    """``(run id, lane)`` of the next run to claim, or None; ``lock`` (PostgreSQL, inside a
    transaction) locks its row, skipping rows other workers hold."""
    with connection.cursor() as cursor:
        cursor.execute(claimable_query(lock=lock))
        row = cursor.fetchone()
    return (row[0], row[1]) if row else None


def serve_lane(lane: str) -> None:
    """Mark ``lane`` served now: its turn becomes one more than the highest turn so far.
    Call in the claim's transaction."""
    table = connection.ops.quote_name(QueueLane._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (lane, turn) VALUES (%s, (SELECT COALESCE(MAX(turn), 0) + 1 FROM {table})) "
            "ON CONFLICT (lane) DO UPDATE SET turn = EXCLUDED.turn",
            [lane],
        )
