"""``runtime.services.plans.plan_json``: a plan's JSON text built from its form is exactly
``json.dumps`` of the plan, as SQLite stores a JSON column (docs/performance.md, "Planning")."""

import json

from hypothesis import given
from hypothesis import strategies as st

from runtime.services import plans
from runtime.services.bulk_rows import JSONText

PLAN = {
    "definition": "reaper@1", "adapter": "command", "argv": ["/py", "/manage.py", "reap"],
    "argvTemplate": ["{python}", "{manage}", "reap"], "argvValues": {"python": "/py", "manage": "/manage.py"},
    "builtin": None, "captureStdout": "reaped.json", "input": {"loop": "reaper", "slot": "2026-11-30T22:00:00Z"},
    "mutating": False, "timeoutSeconds": 600, "maxAttempts": 2, "eventId": "clock:reaper:2026-11-30T22:00:00Z",
    "registryDigest": "sha256:" + "0" * 64,
}

documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(payload=st.dictionaries(st.text(), documents, max_size=5), event_id=st.text())
def test_a_plan_is_the_text_json_dumps_writes(payload, event_id):
    plan = {**PLAN, "input": payload, "eventId": event_id}
    text = plans.plan_json(plan)
    assert type(text) is JSONText
    assert text == json.dumps(plan)


def test_one_form_serves_every_event_of_a_definition_registry_and_argv():
    plans._forms.clear()
    for n in range(3):
        plans.plan_json({**PLAN, "eventId": f"clock:reaper:{n}"})
    assert len(plans._forms) == 1
    other = {**PLAN, "argv": ["/py", "/manage.py", "reap", "--all"], "eventId": "e"}
    assert plans.plan_json(other) == json.dumps(other) and len(plans._forms) == 2
    fake = {**PLAN, "adapter": "fake", "eventId": "f"}
    assert plans.plan_json(fake) == json.dumps(fake) and len(plans._forms) == 3


def test_a_plan_without_its_per_event_entries_in_order_is_encoded_whole():
    reordered = {"eventId": "e", **{k: v for k, v in PLAN.items() if k != "eventId"}}
    missing = {k: v for k, v in PLAN.items() if k != "input"}
    odd = {**PLAN, "argvValues": {"python": ["not", "text"]}}
    plans._forms.clear()
    for plan in (reordered, missing, odd):
        assert plans.plan_json(plan) == json.dumps(plan)
    assert len(plans._forms) == 0


def test_the_forms_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(plans, "FORMS_KEPT", 2)
    plans._forms.clear()
    for n in range(5):
        plans.plan_json({**PLAN, "definition": f"reaper@{n}"})
    assert len(plans._forms) == 1
