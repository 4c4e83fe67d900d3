"""Global barriers: at most one run per barrier claimed, running or interrupted (docs/design.md §7, Barriers).

A definition that declares ``"barrier": "merge"`` (spec §14's global one-merge barrier)
puts the barrier on its runs. A queued run whose barrier another run holds is not
claimable: it waits in the queue, in order, and is claimed once the holder ends. The
claim's check is ``barrier_free_sql``, in the pick and, on SQLite, in the claim's update;
the database has the last word (the partial unique constraint ``run_one_per_barrier``), so
two workers that both saw the barrier free cannot both hold it: on PostgreSQL the second
claim fails with IntegrityError once the first commits (``run_statements.broke_barrier_constraint``
tells that failure from any other by the constraint's name, and the claim is made again), and
on SQLite, whose writes are serial, the compare-and-swap update filtered by it claims nothing.
"""

from django.db import connection

from runtime.models import BARRIER_HOLDING_STATUSES, Run


def barrier_free_sql(alias: str) -> str:
    """Runs of the table aliased ``alias`` without a barrier, or whose barrier no claimed,
    running or interrupted run holds, as SQL for the claim's statements; the holding statuses
    are literals, as the partial index ``run_barrier_idx`` needs on SQLite."""
    statuses = ", ".join(f"'{status}'" for status in BARRIER_HOLDING_STATUSES)
    table = connection.ops.quote_name(Run._meta.db_table)
    return (
        f"({alias}.barrier IS NULL OR NOT EXISTS (SELECT 1 FROM {table} held "
        f"WHERE held.barrier = {alias}.barrier AND held.status IN ({statuses})))"
    )
