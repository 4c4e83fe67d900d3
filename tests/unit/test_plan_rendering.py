"""``runtime.services.plans``: a plan that cannot be rendered is refused with the code
``plan_render_failed``, only a template that names no payload field has its argv
remembered, and ``FACTORY_FAKE_AGENTS`` plays exactly the ``agent`` definitions with the
``fake`` adapter (docs/design.md §8)."""

from types import SimpleNamespace

import pytest

from runtime.services import plans
from runtime.services.plans import PlanRenderError, argv_values, filled_argv, plan_adapter

DIGEST = ("{python}", "{manage}", "digest", "--key", "{payload.key}")
REAPER = ("{python}", "{manage}", "reap", "--run", "{runId}")


def test_a_missing_payload_field_is_refused_as_plan_render_failed():
    """The refusal's code is ``plan_render_failed`` and its message is the detail alone."""
    with pytest.raises(PlanRenderError) as refused:
        argv_values(SimpleNamespace(command=DIGEST), {})
    assert refused.value.code == "plan_render_failed"
    assert refused.value.as_errors() == [
        {"code": "plan_render_failed", "detail": "payload field 'key' is missing or not a string or number"}
    ]
    assert str(refused.value) == "payload field 'key' is missing or not a string or number"


def test_only_a_template_without_payload_fields_is_remembered():
    """A template naming a payload field is filled anew for each event (its argv differs from
    event to event, so remembering it would only fill the cache); one naming none is kept."""
    plans._filled_without_payload.cache_clear()
    values = argv_values(SimpleNamespace(command=DIGEST), {"key": "acme"})
    assert filled_argv(DIGEST, values)[2:] == ["digest", "--key", "acme"]
    assert plans._filled_without_payload.cache_info().currsize == 0
    values = argv_values(SimpleNamespace(command=REAPER), {})
    assert filled_argv(REAPER, values)[2:] == ["reap", "--run", "{runId}"]
    assert plans._filled_without_payload.cache_info().currsize == 1


@pytest.mark.parametrize(("fake_agents", "adapter", "named"), [
    (True, "agent", "fake"), (True, "command", "command"), (True, "builtin", "builtin"),
    (False, "agent", "agent"), (False, "command", "command"),
])
def test_fake_agents_play_only_agent_definitions(settings, fake_agents, adapter, named):
    """With ``FACTORY_FAKE_AGENTS`` an ``agent`` definition's plan names ``fake``; every other
    adapter, and every adapter without the setting, is named as the definition says."""
    settings.FACTORY_FAKE_AGENTS = fake_agents
    assert plan_adapter(SimpleNamespace(adapter=adapter)) == named


def _definition(**fields):
    base = {"ref": "digest@1", "adapter": "command", "command": DIGEST, "builtin": None,
            "capture_stdout": "digest.json", "mutating": True, "timeout_seconds": 120, "max_attempts": 3}
    return SimpleNamespace(**{**base, **fields})


def test_the_runtime_values_name_this_python_and_the_projects_manage_py(settings):
    """``{manage}`` is ``BASE_DIR/manage.py``, ``{python}`` this interpreter, ``{factoryRoot}`` the setting."""
    assert plans.plan_time_values() == {
        "factoryRoot": str(settings.FACTORY_ROOT), "python": plans.sys.executable,
        "manage": str(settings.BASE_DIR / "manage.py"),
    }


def test_a_command_plan_names_every_entry_with_the_events_payload_filled(settings):
    """A command definition's plan, entry by entry and in order: the payload field filled
    from the event, the template and its values kept, the definition's fields as written."""
    settings.FACTORY_FAKE_AGENTS = False
    event = SimpleNamespace(payload={"key": "acme"}, uid="digest-acme-1")
    plan = plans.render_plan(_definition(), event, SimpleNamespace(digest="sha256:" + "1" * 64))
    runtime = plans.plan_time_values()
    assert list(plan.items()) == [
        ("definition", "digest@1"),
        ("adapter", "command"),
        ("argv", [runtime["python"], runtime["manage"], "digest", "--key", "acme"]),
        ("argvTemplate", list(DIGEST)),
        ("argvValues", {"python": runtime["python"], "manage": runtime["manage"], "payload.key": "acme"}),
        ("builtin", None),
        ("captureStdout", "digest.json"),
        ("input", {"key": "acme"}),
        ("mutating", True),
        ("timeoutSeconds", 120),
        ("maxAttempts", 3),
        ("eventId", "digest-acme-1"),
        ("registryDigest", "sha256:" + "1" * 64),
    ]


def test_a_plan_without_a_command_has_no_argv(settings):
    """A definition without a command (an agent, a built-in) has no argv, template nor values."""
    settings.FACTORY_FAKE_AGENTS = False
    definition = _definition(ref="sweep@1", adapter="builtin", command=None, builtin="sweep", capture_stdout=None,
                             mutating=False)
    plan = plans.render_plan(definition, SimpleNamespace(payload={}, uid="e-1"), SimpleNamespace(digest="d"))
    assert {name: plan[name] for name in ("adapter", "argv", "argvTemplate", "argvValues", "builtin", "mutating")} == {
        "adapter": "builtin", "argv": None, "argvTemplate": None, "argvValues": None, "builtin": "sweep",
        "mutating": False,
    }


AGENT_PLAN = {
    "definition": "merge-scan@1", "adapter": "agent", "argv": None, "argvTemplate": None, "argvValues": None,
    "builtin": None, "captureStdout": None, "input": {"repo": "alpha"}, "mutating": False, "timeoutSeconds": 600,
    "maxAttempts": 1, "eventId": "e-1", "registryDigest": "sha256:" + "2" * 64,
}


def test_a_form_is_built_once_and_reused_for_the_next_events(monkeypatch):
    """The second and third plan of one definition, registry and argv take the kept form: it is
    built once. A plan without argv (an agent's) has its form kept too."""
    built = []
    build = plans._form
    monkeypatch.setattr(plans, "_form", lambda key, plan: built.append(key) or build(key, plan))
    plans._forms.clear()
    for n in range(3):
        plan = {**AGENT_PLAN, "eventId": f"e-{n}", "input": {"repo": "alpha", "n": n}}
        assert plans.plan_json(plan) == plans.json.dumps(plan)
    assert len(built) == 1 and list(plans._forms) == built
    assert built[0][:4] == ("merge-scan@1", "sha256:" + "2" * 64, "agent", 13)
    assert built[0][4:] == (None, None)


@pytest.mark.parametrize("event_id", [7, None, 2.5])
def test_an_event_id_that_is_not_text_is_encoded_as_json_dumps_does(event_id):
    """The form encodes a text eventId with the string encoder, anything else as JSON."""
    plan = {**AGENT_PLAN, "eventId": event_id}
    assert plans.plan_json(plan) == plans.json.dumps(plan)
