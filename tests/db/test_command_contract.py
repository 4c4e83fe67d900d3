"""What a command gets (issue 11, list 5; docs/design.md §8): the plan's argv exactly, with only
the run's own ``{runId}``/``{runDir}`` filled in — never inside a payload value — and an
environment that holds no secret."""

import json
import sys
from pathlib import Path

import pytest

from runtime.adapters.command import minimal_environment
from runtime.models import Run
from runtime.services.execution import work_one
from tests.conftest import NO_HEARTBEAT
from tests.helpers import inject, tick
from tests.registry_checks import errors

pytestmark = pytest.mark.django_db

PRINT_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"


@pytest.fixture
def echo(registry_files):
    """A read-only command ``echo@1`` that prints its arguments, auto-approved for ``test.echo``."""
    registry_files.write_config("schedule.yaml", NO_HEARTBEAT)
    registry_files.write("definitions/echo@1.json", {
        "id": "echo", "version": 1, "adapter": "command",
        "command": ["{python}", "-c", PRINT_ARGV, "{payload.note}", "{runDir}", "run={runId}", "{payload.count}"],
        "captureStdout": "argv.json", "output_contract": "factory.command-result/v1", "mutating": False,
        "timeoutSeconds": 30, "maxAttempts": 1,
    })
    registry_files.update("event-types.json", lambda types: types.__setitem__(
        "test.echo", {"target": "echo@1", "approval": "auto"},
    ))
    return registry_files


def test_a_payload_value_holding_a_run_time_placeholder_reaches_the_command_as_that_text(echo, settings):
    inject("echo-1", "test.echo", {"note": "{runDir} and {runId} and {python}", "count": 3})
    tick("2026-11-30T10:00:00Z")
    run = Run.objects.get(event__uid="echo-1")
    assert run.plan["argv"] == [
        sys.executable, "-c", PRINT_ARGV, "{runDir} and {runId} and {python}", "{runDir}", "run={runId}", "3",
    ]
    assert work_one(worker="w1")
    run.refresh_from_db()
    run_dir = str(Path(settings.FACTORY_RUNS_DIR) / str(run.pk))
    ran = json.loads(Path(run.stdout_path).read_text())
    assert ran == ["{runDir} and {runId} and {python}", run_dir, f"run={run.pk}", "3"]
    assert (run.status, run.outcome) == ("succeeded", "SUCCEEDED")


def test_what_runs_is_the_plan_shown_with_the_runs_id_and_directory(echo, settings):
    inject("echo-2", "test.echo", {"note": "plain", "count": 1})
    tick("2026-11-30T10:00:00Z")
    run = Run.objects.get(event__uid="echo-2")
    work_one(worker="w1")
    run.refresh_from_db()
    run_dir = str(Path(settings.FACTORY_RUNS_DIR) / str(run.pk))
    shown = [arg.replace("{runDir}", run_dir).replace("{runId}", str(run.pk)) for arg in run.plan["argv"]]
    assert json.loads(Path(run.stdout_path).read_text()) == shown[3:]


def test_no_secret_reaches_a_commands_environment(monkeypatch, tmp_path):
    for name, value in {
        "DJANGO_SECRET_KEY": "s3cret", "DATABASE_URL": "postgres://u:pw@db/x", "FACTORY_EVENTS_SECRET": "e",
        "FACTORY_GITHUB_WEBHOOK_SECRET": "g", "FACTORY_API_TOKEN": "t", "FACTORY_OPERATOR_PASSWORD": "p",
    }.items():
        monkeypatch.setenv(name, value)
    env = minimal_environment(7, tmp_path)
    assert not {"DJANGO_SECRET_KEY", "DATABASE_URL", "FACTORY_EVENTS_SECRET", "FACTORY_GITHUB_WEBHOOK_SECRET",
                "FACTORY_API_TOKEN", "FACTORY_OPERATOR_PASSWORD"} & set(env)
    assert "s3cret" not in json.dumps(env) and "pw@db" not in json.dumps(env)
    assert (env["FACTORY_RUN_ID"], env["FACTORY_RUN_DIR"], env["TZ"]) == ("7", str(tmp_path), "UTC")


def test_the_heartbeat_reports_health_from_inside_the_worker_with_no_command(registry_files, settings):
    tick("2026-11-30T10:00:00Z")
    run = Run.objects.get(definition="heartbeat@1")
    assert (run.plan["adapter"], run.plan["builtin"], run.plan["argv"]) == ("builtin", "health", None)
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert run.status == "succeeded" and run.outcome in ("HEALTHY", "DEGRADED")
    assert run.result_data["registryDigest"] == run.registry_digest
    assert (run.result_data["runsQueued"], run.result_data["runsRunning"]) == (0, 1)
    line = json.loads(Path(run.stdout_path).read_text())
    assert (line["schemaVersion"], line["outcome"], line["data"]) == (
        "factory.command-result/v1", run.outcome, run.result_data,
    )
    assert Path(run.stdout_path) == Path(settings.FACTORY_RUNS_DIR) / str(run.pk) / "health.json"


@pytest.mark.parametrize("change, error", [
    ({"builtin": "nope"}, "unknown_builtin: a builtin definition names one of health as builtin, not 'nope'"),
    ({"mutating": True}, "builtin_with_command: a builtin runs inside the worker: no command, and mutating: false"),
    ({"command": ["x"]}, "builtin_with_command: a builtin runs inside the worker: no command, and mutating: false"),
    ({"adapter": "command", "command": ["x"]},
     "builtin_with_command: builtin belongs to a definition whose adapter is builtin"),
])
def test_a_builtin_definition_names_a_known_report_and_runs_nothing(registry_files, change, error):
    registry_files.update("definitions/heartbeat@1.json", lambda d: d.update(change))
    assert errors(registry_files) == [f"registry/definitions/heartbeat@1.json: heartbeat@1: {error}"]
