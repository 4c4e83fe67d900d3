"""A planned chunk stores each plan exactly as saving the model would: on SQLite the text
``json.dumps`` writes (``plans.plan_json``), the run's the same as its proposal's
(docs/design.md §7; docs/performance.md, "Planning")."""

import json

import pytest
from django.db import connection

from runtime.models import Proposal, Run
from runtime.registry import get_registry
from runtime.services.planning import plan_pending
from schedules.ticks import emit_due_ticks
from tests.conftest import at
from tests.helpers import SHIP_PAYLOAD, inject

WATCHED_REAPER = "schedules:\n  reaper:\n    enabled: true\n"


def stored_plan(model, pk: int):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT plan FROM {model._meta.db_table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_each_plan_is_stored_as_saving_the_model_stores_it(registry_files):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    emit_due_ticks(now=at("2026-11-30T22:00:20Z"), registry=get_registry())
    inject("ship-1", "factory.ship-apply.requested", SHIP_PAYLOAD)
    assert plan_pending(now=at("2026-11-30T22:00:30Z")) == 3
    proposals = list(Proposal.objects.order_by("id"))
    assert [p.definition for p in proposals] == ["heartbeat@1", "reaper@1", "ship-apply@1"]
    assert proposals[1].plan["argv"] and proposals[2].plan["input"] == SHIP_PAYLOAD
    for proposal in proposals:
        stored = stored_plan(Proposal, proposal.pk)
        if connection.vendor == "sqlite":
            assert stored == json.dumps(proposal.plan)
        else:
            assert json.loads(stored) == proposal.plan
    run = Run.objects.get()
    assert run.definition == "heartbeat@1"
    assert stored_plan(Run, run.pk) == stored_plan(Proposal, run.proposal_id)
