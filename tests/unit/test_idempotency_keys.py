"""A definition's idempotency key template: load errors and filling (docs/design.md §4, §7.2)."""

import pytest

from runtime.registry import RegistryInvalid, load_registry
from runtime.registry.keys import render_key

APPLY = "definitions/merge-apply@1.json"
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"


def errors(files):
    with pytest.raises(RegistryInvalid) as raised:
        load_registry(files.registry_dir, files.config_dir)
    return [str(e) for e in raised.value.errors]


def set_key(files, template, path=APPLY):
    files.update(path, lambda d: d.__setitem__("idempotencyKey", template))


def test_the_section_14_definitions_declare_their_keys_merge_scan_its_wait_and_merge_apply_its_barrier(registry_files):
    definitions = load_registry(registry_files.registry_dir, registry_files.config_dir).definitions
    assert {
        ref: (d.idempotency_key, d.release_key_on, d.barrier)
        for ref, d in definitions.items() if d.idempotency_key or d.release_key_on or d.barrier
    } == {
        "merge-scan@1": ("merge-scan:{payload.repo}:{payload.prNumbers}:{payload.headSha}", ("WAIT",), None),
        "merge-apply@1": ("merge-apply:{payload.repo}:{payload.prNumber}:{payload.headSha}", (), "merge"),
        "ship-apply@1": ("ship-apply:{payload.repo}:{payload.headSha}", (), None),
    }


def test_a_template_naming_a_field_the_input_schema_lacks_is_a_load_error(registry_files):
    set_key(registry_files, "merge-apply:{payload.repo}:{payload.pr}:{payload.sha}")
    assert errors(registry_files) == [
        "registry/definitions/merge-apply@1.json: merge-apply@1: idempotency_key_unknown_field: "
        "idempotencyKey names {payload.pr}, which its inputSchema does not declare under properties",
        "registry/definitions/merge-apply@1.json: merge-apply@1: idempotency_key_unknown_field: "
        "idempotencyKey names {payload.sha}, which its inputSchema does not declare under properties",
    ]


def test_a_template_on_a_definition_without_input_schema_is_a_load_error(registry_files):
    registry_files.update(APPLY, lambda d: d.pop("inputSchema"))
    set_key(registry_files, "merge-apply:{payload.repo}")
    assert errors(registry_files) == [
        "registry/definitions/merge-apply@1.json: merge-apply@1: idempotency_key_unknown_field: "
        "idempotencyKey names {payload.repo}, which no input can carry: the definition has no inputSchema",
    ]


@pytest.mark.parametrize("template, why", [
    ("merge-apply", "it names no {payload.<field>}, so every event of the definition would share one key"),
    ("merge-apply:{repo}", "'merge-apply:{repo}' has a brace outside a placeholder; a placeholder is {payload.<field>}, a top-level field"),
    ("m:{payload.evidence.prNumber}", "'m:{payload.evidence.prNumber}' has a brace outside a placeholder; a placeholder is {payload.<field>}, a top-level field"),
    ("m:{payload.repo}}", "'}' has a brace outside a placeholder; a placeholder is {payload.<field>}, a top-level field"),
    ("merge apply:{payload.repo}", "'merge apply:' is not printable ASCII without spaces"),
    ("merge-apply:{payload.repo}{payload.prNumber}", "{payload.prNumber} follows another placeholder directly; "
     "separate them with literal text, or two inputs could share a key (repo a1 and PR 2, repo a and PR 12)"),
])
def test_a_malformed_template_is_a_load_error_naming_file_entry_and_reason(registry_files, template, why):
    set_key(registry_files, template)
    assert errors(registry_files) == [
        f"registry/definitions/merge-apply@1.json: merge-apply@1: idempotency_key_malformed: "
        f"idempotencyKey {template!r} is not a key template: {why}"
    ]


@pytest.mark.parametrize("template", ["merge-scan:{payload.repo}", "{payload.repo}:{payload.headSha}", "merge-applyx:{payload.repo}"])
def test_a_template_outside_its_definitions_scope_is_a_load_error(registry_files, template):
    set_key(registry_files, template)
    assert errors(registry_files) == [
        f"registry/definitions/merge-apply@1.json: merge-apply@1: idempotency_key_unscoped: "
        f"idempotencyKey {template!r} must begin with 'merge-apply:', so that no other definition, loop or eventId shares its keys"
    ]


def test_a_loop_named_as_a_definition_with_a_template_is_a_load_error(registry_files):
    registry_files.write_config(
        "schedule.yaml",
        "schedules:\n  merge-scan:\n    every: 5m\n    eventType: clock.tick.heartbeat\n"
        "    catchUp: last\n    singleton: true\n    approval: watched\n    enabled: true\n",
    )
    assert errors(registry_files) == [
        f"{registry_files.config_dir}/schedule.yaml: merge-scan: loop_name_is_key_scope: definition 'merge-scan' keys its runs "
        "merge-scan:…, and a loop's ticks are keyed by its name; rename the loop",
    ]


def test_an_empty_template_a_bad_barrier_and_a_bad_release_outcome_break_the_definition_schema(registry_files):
    set_key(registry_files, "")
    registry_files.update(APPLY, lambda d: d.update(barrier="One Merge", releaseKeyOn=["wait"]))
    assert errors(registry_files) == [
        "registry/definitions/merge-apply@1.json: <top>: schema: at barrier: 'One Merge' does not match '^[a-z0-9][a-z0-9-]{0,62}$'",
        "registry/definitions/merge-apply@1.json: <top>: schema: at idempotencyKey: '' should be non-empty",
        "registry/definitions/merge-apply@1.json: <top>: schema: at releaseKeyOn/0: 'wait' does not match '^[A-Z][A-Z0-9_]*$'",
    ]


def test_a_template_is_filled_from_scalars_and_lists_of_scalars():
    template = "merge-scan:{payload.repo}:{payload.prNumbers}:{payload.headSha}"
    assert render_key(template, {"repo": "alpha", "prNumbers": [7], "headSha": SHA}) == f"merge-scan:alpha:7:{SHA}"
    assert render_key(template, {"repo": "alpha", "prNumbers": [7, 8], "headSha": SHA}) == f"merge-scan:alpha:7,8:{SHA}"
    assert render_key("k:{payload.repo}:{payload.repo}", {"repo": "alpha"}) == "k:alpha:alpha"


def test_an_integer_written_with_a_fraction_of_zero_keys_as_the_integer():
    """JSON Schema's ``integer`` admits ``7.0``: it must not slip past the key ``7`` holds."""
    template = "merge-scan:{payload.repo}:{payload.prNumbers}:{payload.headSha}"
    assert render_key(template, {"repo": "alpha", "prNumbers": [7.0, 8], "headSha": SHA}) == f"merge-scan:alpha:7,8:{SHA}"
    assert render_key("k:{payload.runId}", {"runId": 1e20}) == "k:100000000000000000000"


@pytest.mark.parametrize("payload", [
    {"repo": "alpha"},                                            # the merge-<repo> sweep: no PR, no head
    {"repo": "alpha", "prNumbers": [7]},                          # no head
    {"repo": "alpha", "prNumbers": [], "headSha": SHA},
    {"repo": "alpha", "prNumbers": [[7]], "headSha": SHA},
    {"repo": "alpha", "prNumbers": [7], "headSha": ""},
    {"repo": "alpha", "prNumbers": [7], "headSha": None},
    {"repo": "alpha", "prNumbers": [True], "headSha": SHA},
    {"repo": "alpha", "prNumbers": [7.5], "headSha": SHA},
    {"repo": {"name": "alpha"}, "prNumbers": [7], "headSha": SHA},
])
def test_a_template_does_not_apply_when_a_field_is_missing_or_not_a_key_value(payload):
    assert render_key("merge-scan:{payload.repo}:{payload.prNumbers}:{payload.headSha}", payload) is None
