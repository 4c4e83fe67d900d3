"""The foreign keys that are mostly null are indexed only where set, and every lookup by one
still reads its partial index (docs/performance.md; migration runtime 0012)."""

import pytest
from django.db import connection

from runtime.models import Event, JournalEntry, Proposal, Run

pytestmark = pytest.mark.django_db

#: A lookup by each key, as the ORM and the foreign-key checks write it, and the index it must use.
LOOKUPS = [
    (JournalEntry.objects.filter(proposal_id=7), "journal_proposal_idx"),
    (JournalEntry.objects.filter(proposal_id__in=[7, 8]), "journal_proposal_idx"),
    (JournalEntry.objects.filter(run_id=7), "journal_run_idx"),
    (Proposal.objects.filter(decided_by_id=3), "proposal_decided_by_idx"),
    (Run.objects.filter(approved_by_id=3), "run_approved_by_idx"),
]


def plan_of(queryset) -> str:
    sql, params = queryset.values("id").query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Empty tables: without this the planner reads the table instead of any index.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
            return " ".join(row[0] for row in cursor.fetchall())
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(row[-1] for row in cursor.fetchall())


@pytest.mark.parametrize(("queryset", "index"), LOOKUPS, ids=[index + str(n) for n, (_, index) in enumerate(LOOKUPS)])
def test_a_lookup_by_a_mostly_null_key_reads_its_partial_index(queryset, index):
    assert index in plan_of(queryset)


def test_the_nulls_are_left_out_of_the_indexes():
    with connection.cursor() as cursor:
        definitions = {
            name: " ".join(sql.split())
            for name, sql in _index_definitions(cursor, ["journal_proposal_idx", "journal_run_idx",
                                                         "proposal_decided_by_idx", "run_approved_by_idx"])
        }
    assert {name: sql.split(" WHERE ")[-1].replace('"', "").replace("(", "").replace(")", "")
            for name, sql in definitions.items()} == {
        "journal_proposal_idx": "proposal_id IS NOT NULL",
        "journal_run_idx": "run_id IS NOT NULL",
        "proposal_decided_by_idx": "decided_by_id IS NOT NULL",
        "run_approved_by_idx": "approved_by_id IS NOT NULL",
    }


def _index_definitions(cursor, names: list[str]) -> list[tuple[str, str]]:
    marks = ", ".join(["%s"] * len(names))
    if connection.vendor == "postgresql":
        cursor.execute(f"SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN ({marks})", names)
    else:
        cursor.execute(f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name IN ({marks})", names)
    return cursor.fetchall()


def test_the_event_id_has_one_index_its_unique_constraint():
    """No pattern-ops index beside it on PostgreSQL: every admission and planned event wrote one."""
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, Event._meta.db_table)
    on_uid = [(name, index["unique"]) for name, index in indexes.items() if index["columns"] == ["uid"]]
    assert len(on_uid) == 1 and on_uid[0][1] is True
    if connection.vendor == "postgresql":
        assert on_uid[0][0] == "event_uid_unique"
