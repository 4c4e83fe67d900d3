"""The argv a plan carries (docs/design.md §8): placeholders named once per template, payload
values filled per event, and a template that names no payload field filled once and handed
out as a new list each time."""

from types import SimpleNamespace

import pytest

from runtime.services.plans import PlanRenderError, argv_values, filled_argv, plan_time_names, plan_time_values

DIGEST = ("{python}", "{manage}", "digest", "--key", "{payload.key}", "--out", "{runDir}/{payload.key}.txt")
REAPER = ("{python}", "{manage}", "reap", "--root", "{factoryRoot}", "--run", "{runId}")


def test_the_names_planning_fills_are_read_once_each_in_the_templates_order():
    assert plan_time_names(DIGEST) == ("python", "manage", "payload.key")
    assert plan_time_names(REAPER) == ("python", "manage", "factoryRoot")


def test_payload_values_are_filled_per_event_and_a_run_time_placeholder_is_left():
    runtime = plan_time_values()
    first = filled_argv(DIGEST, argv_values(SimpleNamespace(command=DIGEST), {"key": "acme"}))
    second = filled_argv(DIGEST, argv_values(SimpleNamespace(command=DIGEST), {"key": "{runDir}"}))
    assert first == [runtime["python"], runtime["manage"], "digest", "--key", "acme", "--out", "{runDir}/acme.txt"]
    assert second == [runtime["python"], runtime["manage"], "digest", "--key", "{runDir}", "--out",
                      "{runDir}/{runDir}.txt"]


def test_a_template_without_payload_fields_is_the_same_argv_in_a_new_list_each_time():
    values = argv_values(SimpleNamespace(command=REAPER), {"ignored": 1})
    first, second = filled_argv(REAPER, values), filled_argv(REAPER, values)
    assert first == second == [values["python"], values["manage"], "reap", "--root", values["factoryRoot"],
                               "--run", "{runId}"]
    first.append("changed")
    assert filled_argv(REAPER, values)[-1] == "{runId}"


def test_other_runtime_values_give_another_argv(settings, tmp_path):
    before = filled_argv(REAPER, argv_values(SimpleNamespace(command=REAPER), {}))
    settings.FACTORY_ROOT = tmp_path
    after = filled_argv(REAPER, argv_values(SimpleNamespace(command=REAPER), {}))
    assert after[4] == str(tmp_path) != before[4]


@pytest.mark.parametrize("payload", [{}, {"key": True}, {"key": ["a"]}, {"key": None}])
def test_a_missing_or_non_scalar_payload_field_is_refused(payload):
    with pytest.raises(PlanRenderError, match="payload field 'key' is missing or not a string or number"):
        argv_values(SimpleNamespace(command=DIGEST), payload)
