"""Migration 0008: keys that were a bare eventId get the ``eventId:`` prefix; tick and
template keys stay as they are (docs/design.md §7.2)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.conftest import SHA

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runtime", "0007_journal_truncate_guard")]
AFTER = [("runtime", "0008_event_key_prefix")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_bare_eventid_keys_are_prefixed_and_back():
    at_now = "2026-11-30T10:00:00Z"
    apps = migrate(BEFORE)
    Event, Proposal = apps.get_model("runtime", "Event"), apps.get_model("runtime", "Proposal")

    def event(uid, **fields):
        return Event.objects.create(
            uid=uid, type="t", source="s", subject="x", occurred_at=at_now, correlation_id=uid,
            payload={}, door=fields.pop("door", "events"), admitted_at=at_now, **fields,
        )

    rows = {
        "sweep-1": "sweep-1",
        "clock:heartbeat:2026-11-30T10:00:00Z": "heartbeat:2026-11-30T10:00:00Z",
        "pinned-1": f"merge-scan:alpha:7:{SHA}",
    }
    for uid, key in rows.items():
        Proposal.objects.create(
            event=event(uid), idempotency_key=key, plan={}, registry_digest="d", definition="x@1", created_at=at_now
        )
    apps = migrate(AFTER)
    keys = dict(apps.get_model("runtime", "Proposal").objects.values_list("event__uid", "idempotency_key"))
    assert keys == {**rows, "sweep-1": "eventId:sweep-1"}
    apps = migrate(BEFORE)
    keys = dict(apps.get_model("runtime", "Proposal").objects.values_list("event__uid", "idempotency_key"))
    assert keys == rows
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
