"""A mutating command's preview: its dry run derived from its own command, checked at load
(docs/design.md §4, Previews), each rule with its exact error."""

import pytest

from runtime.registry.model import preview_template
from tests.registry_checks import errors, load

REAPER = "definitions/reaper@1.json"
WHERE = "registry/definitions/reaper@1.json: reaper@1"


def test_the_kernel_reaper_previews_by_dropping_apply(registry_files):
    reaper = load(registry_files).definitions["reaper@1"]
    assert (reaper.preview_drop, reaper.preview_add, reaper.preview_timeout_seconds) == (("--apply",), (), 60)
    assert preview_template(reaper.command, reaper.preview_drop, reaper.preview_add) == [
        "{python}", "{factoryRoot}/orchestrator/reaper.py", "--root", "{factoryRoot}",
    ]
    assert reaper.description.startswith("Moves claim files whose heartbeat is older than the stale limit")


def test_a_preview_may_add_a_flag_and_its_time_out_defaults_to_60_s_within_the_definitions(registry_files):
    def declare(d):
        d["preview"] = {"drop": ["--apply"], "add": ["--dry-run"]}
        del d["previewTimeoutSeconds"]
        d["timeoutSeconds"] = 30
    registry_files.update(REAPER, declare)
    reaper = load(registry_files).definitions["reaper@1"]
    assert (reaper.preview_drop, reaper.preview_add, reaper.preview_timeout_seconds) == (("--apply",), ("--dry-run",), 30)


def test_a_definition_without_a_preview_has_none(registry_files):
    merge_scan = load(registry_files).definitions["merge-scan@1"]
    assert (merge_scan.has_preview, merge_scan.preview_timeout_seconds) == (False, None)


@pytest.mark.parametrize(("preview", "rule", "detail"), [
    ({"drop": ["--force"]}, "preview_flag_missing", "the preview drops '--force', which the command lacks"),
    ({"drop": ["--apply"], "add": ["--ticket={payload.ticket}"]}, "preview_flag_placeholder",
     "the preview adds '--ticket={payload.ticket}', a placeholder: an added flag is literal text"),
    ({"drop": ["--apply"], "add": ["--apply"]}, "preview_same_as_command",
     "the preview's argv equals the command: it would do what the run does"),
    ({"drop": ["{factoryRoot}"]}, "preview_not_a_flag", "'{factoryRoot}' is not a flag: a preview drops or adds flags only"),
])
def test_a_preview_that_is_not_the_commands_own_dry_run_is_a_load_error(registry_files, preview, rule, detail):
    registry_files.update(REAPER, lambda d: d.update(preview=preview))
    assert errors(registry_files)[0] == f"{WHERE}: {rule}: {detail}"


def test_a_preview_time_out_above_the_definitions_is_a_load_error(registry_files):
    registry_files.update(REAPER, lambda d: d.update(previewTimeoutSeconds=601))
    assert errors(registry_files) == [
        f"{WHERE}: preview_timeout_too_long: previewTimeoutSeconds 601 is above the definition's timeoutSeconds 600"
    ]


def test_a_preview_on_a_read_only_definition_is_a_load_error(registry_files):
    registry_files.update(REAPER, lambda d: d.update(mutating=False))
    assert errors(registry_files) == [
        f"{WHERE}: preview_not_allowed: a preview is the dry run of a mutating command: only an adapter command "
        "definition with mutating: true may declare one"
    ]


def test_a_preview_on_a_non_command_definition_is_a_load_error(registry_files):
    registry_files.update("definitions/merge-apply@1.json", lambda d: d.update(preview={"add": ["--dry-run"]}))
    assert errors(registry_files) == [
        "registry/definitions/merge-apply@1.json: merge-apply@1: preview_not_allowed: a preview is the dry run of a "
        "mutating command: only an adapter command definition with mutating: true may declare one"
    ]


def test_a_preview_time_out_without_a_preview_is_a_load_error(registry_files):
    registry_files.update(REAPER, lambda d: d.pop("preview"))
    assert errors(registry_files) == [f"{WHERE}: preview_not_allowed: previewTimeoutSeconds without a preview to time"]


def test_an_unknown_preview_key_is_a_shape_error(registry_files):
    registry_files.update(REAPER, lambda d: d.update(preview={"remove": ["--apply"]}))
    assert len(errors(registry_files)) == 1 and "remove" in errors(registry_files)[0]
