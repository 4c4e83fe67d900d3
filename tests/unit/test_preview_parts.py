"""The pure parts of previews (docs/design.md §8, Previews): the argv a plan's preview runs, its
time-out, its refusals' HTTP statuses, its duration, and what of a command's output its row keeps."""

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime.preview_model import PreviewStatus
from runtime.registry.model import Definition
from runtime.services import preview_execution, previews
from runtime.services.preview_execution import _first_bytes, _storable, play_fake_preview, preview_dir
from runtime.services.previews import PreviewRefused, preview_argv, preview_duration, preview_timeout

REAPER = Definition(
    id="reaper", version=1, adapter="command", command=("tool", "--apply", "{payload.ticket}"), capture_stdout=None,
    output_contract="factory.command-result/v1", mutating=True, input_schema=None, output_schema=None,
    timeout_seconds=300, max_attempts=1, allow_scheduled=True, preview_drop=("--apply",), preview_add=("--dry-run",),
    preview_timeout_seconds=45,
)
PLAN = {"definition": "reaper@1", "argvTemplate": ["tool", "--apply", "{payload.ticket}", "{runDir}"],
        "argvValues": {"payload.ticket": "T-7"}}
START = datetime(2026, 11, 30, 21, 0, 0, tzinfo=UTC)


def with_fields(**changes) -> Definition:
    return Definition(**{**REAPER.__dict__, **changes})


@pytest.mark.parametrize(("code", "status"), [
    ("permission_denied", 403), ("not_found", 404), ("not_pending", 409), ("no_preview", 409),
    ("preview_in_progress", 409), ("preview_too_soon", 429),
])
def test_each_preview_refusal_has_its_http_status(code, status):
    """Each refusal code answers with its own HTTP status, and keeps its code and detail."""
    refused = PreviewRefused(code, "why")
    assert (refused.code, refused.detail, refused.status) == (code, "why", status)


def test_the_preview_argv_drops_and_adds_the_flags_and_fills_the_plans_values():
    """The plan's own template, the dropped flags gone and the added ones at the end, filled with
    the plan's values; the run's own placeholders stay for the preview's run."""
    assert preview_argv(PLAN, REAPER, {}) == ["tool", "T-7", "{runDir}", "--dry-run"]


def test_a_plan_without_values_keeps_its_placeholders():
    """No ``argvValues``: every placeholder stays as written."""
    plan = {key: value for key, value in PLAN.items() if key != "argvValues"}
    assert preview_argv(plan, REAPER, {}) == ["tool", "{payload.ticket}", "{runDir}", "--dry-run"]


def test_no_preview_argv_without_a_preview_a_template_or_a_flag_to_drop():
    """None: the definition declares no preview, the plan has no command template, the template
    lacks a flag to drop, or dropping and adding leave the command as it is."""
    assert preview_argv(PLAN, with_fields(preview_drop=None), {}) is None
    assert preview_argv({**PLAN, "argvTemplate": None}, REAPER, {}) is None
    assert preview_argv({"definition": "reaper@1"}, REAPER, {}) is None
    assert preview_argv({**PLAN, "argvTemplate": ["tool", "{runDir}"]}, REAPER, {}) is None
    assert preview_argv(PLAN, with_fields(preview_drop=("--apply", "--force")), {}) is None
    assert preview_argv(PLAN, with_fields(preview_drop=(), preview_add=()), {}) is None
    assert preview_argv(PLAN, with_fields(preview_drop=(), preview_add=("--x",)), {}) == [
        "tool", "--apply", "T-7", "{runDir}", "--x"]


def test_the_demos_stand_in_is_previewed_only_when_mutating_and_scripted(monkeypatch):
    """A ``fake`` plan: ``[]`` (no command) when the definition is mutating and its script has a
    preview for the plan, read against the definitions given; None otherwise."""
    asked = []

    def scripted(plan, definitions):
        asked.append((plan, definitions))
        return {"outcome": "WOULD"} if plan.get("input") == {"x": 1} else None

    monkeypatch.setattr(previews, "scripted_preview", scripted)
    fake = {"definition": "reaper@1", "adapter": "fake", "input": {"x": 1}}
    known = {"reaper@1": REAPER}
    assert preview_argv(fake, REAPER, known) == []
    assert asked == [(fake, known)]
    assert preview_argv({**fake, "input": {"x": 2}}, REAPER, known) is None
    assert preview_argv(fake, with_fields(mutating=False), known) is None
    assert preview_argv(fake, with_fields(preview_drop=None), known) == []


def test_the_preview_time_out_is_the_definitions_or_60_s_within_its_own():
    """``previewTimeoutSeconds`` when declared; else the 60 s default, never above the definition's
    own time-out."""
    assert preview_timeout(REAPER) == 45
    assert preview_timeout(with_fields(preview_timeout_seconds=None)) == 60
    assert preview_timeout(with_fields(preview_timeout_seconds=None, timeout_seconds=30)) == 30
    assert preview_timeout(with_fields(preview_timeout_seconds=None, timeout_seconds=61)) == 60


def test_a_previews_duration_is_to_the_millisecond_once_started_and_finished():
    """Seconds from start to end, rounded to the millisecond; None without both instants."""
    ended = START + timedelta(seconds=2, microseconds=345_600)
    assert preview_duration(SimpleNamespace(started_at=START, finished_at=ended)) == 2.346
    assert preview_duration(SimpleNamespace(started_at=START, finished_at=None)) is None
    assert preview_duration(SimpleNamespace(started_at=None, finished_at=ended)) is None
    assert preview_duration(SimpleNamespace(started_at=START, finished_at=START)) == 0.0


def test_a_result_is_made_storable_nul_by_nul_in_text_lists_and_keys():
    """Every NUL of text, of list items and of mapping keys and values is U+FFFD; other values stay."""
    assert _storable("a\x00b\x00") == "a\ufffdb\ufffd"
    assert _storable(["\x00", 1, None]) == ["\ufffd", 1, None]
    assert _storable({"k\x00": {"x": ["v\x00"]}, "n": 2.5}) == {"k\ufffd": {"x": ["v\ufffd"]}, "n": 2.5}
    assert _storable(7) == 7


def test_a_row_keeps_the_first_16_kib_of_the_output_as_text(tmp_path):
    """The first 16,384 bytes, decoded as UTF-8 with undecodable bytes and NUL written U+FFFD;
    "" when the capture cannot be read."""
    capture = tmp_path / "stdout.log"
    capture.write_bytes(b"a\x00\xff" + b"x" * (16 * 1024) + b"tail")
    head = _first_bytes(capture)
    assert head == "a\ufffd\ufffd" + "x" * (16 * 1024 - 3)
    assert _first_bytes(tmp_path / "absent.log") == ""
    capture.write_bytes("é\n".encode())
    assert _first_bytes(capture) == "é\n"


def test_a_preview_runs_in_its_own_directory_under_the_runs_directory(settings, tmp_path):
    """``FACTORY_RUNS_DIR/previews/<id>``."""
    settings.FACTORY_RUNS_DIR = str(tmp_path)
    assert preview_dir(12) == Path(tmp_path) / "previews" / "12"


def test_the_demos_stand_in_plays_its_scripted_preview(monkeypatch):
    """Done with the script's outcome, summary (default "") and data, exit code 0; failed
    ``fake_preview_missing`` when the script has none for the plan."""
    plan = {"definition": "reaper@1", "adapter": "fake", "input": {}}
    preview = SimpleNamespace(proposal=SimpleNamespace(plan=plan))
    known = {"reaper@1": REAPER}
    monkeypatch.setattr(preview_execution, "get_registry", lambda: SimpleNamespace(definitions=known))
    seen = []

    def scripted(plan_given, definitions):
        seen.append((plan_given, definitions))
        return script

    monkeypatch.setattr(preview_execution, "scripted_preview", scripted)
    script = {"outcome": "WOULD", "summary": "s", "data": {"n": 1}}
    assert play_fake_preview(preview) == {
        "status": PreviewStatus.DONE, "outcome": "WOULD", "summary": "s", "data": {"n": 1}, "exit_code": 0}
    assert seen == [(plan, known)]
    script = {"outcome": "WOULD"}
    assert play_fake_preview(preview) == {
        "status": PreviewStatus.DONE, "outcome": "WOULD", "summary": "", "data": None, "exit_code": 0}
    script = None
    assert play_fake_preview(preview) == {
        "status": PreviewStatus.FAILED, "reason": "fake_preview_missing",
        "detail": "the demo's fake-outcomes.yaml has no preview for this proposal's rule"}
