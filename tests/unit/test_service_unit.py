"""The systemd unit of runserve (``render_service_unit``, ops.service_unit; docs/production.md)."""

import shutil
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ops.service_unit import ServiceOptions, service_unit
from runtime.adapters.command import KEEPER_EXIT_SECONDS, KILL_GRACE_SECONDS
from tests.conftest import PROJECT_DIR

OPTIONS = ServiceOptions(
    python="/opt/factory/.venv/bin/python", manage="/opt/factory/manage.py", workdir="/opt/factory",
    env_file="/etc/factory/factory.env", user="factory", group="factory", bind="127.0.0.1:7522",
    http_workers=2, run_workers=1, stop_wait_seconds=33.5,
)


def render(*args) -> str:
    out = StringIO()
    call_command("render_service_unit", *args, stdout=out)
    return out.getvalue()


def test_the_unit_restarts_on_failure_and_lets_runserve_stop_its_children():
    assert service_unit(OPTIONS).decode() == (
        "# Rendered by `manage.py render_service_unit`; install it by hand (docs/production.md).\n"
        "[Unit]\n"
        "Description=Factory event runtime (runserve: HTTP, slot loop, run workers)\n"
        "After=network-online.target postgresql.service\n"
        "Wants=network-online.target\n"
        "\n[Service]\n"
        "Type=simple\n"
        "User=factory\n"
        "Group=factory\n"
        "WorkingDirectory=/opt/factory\n"
        "EnvironmentFile=/etc/factory/factory.env\n"
        "ExecStart=/opt/factory/.venv/bin/python /opt/factory/manage.py runserve --bind 127.0.0.1:7522 "
        "--http-workers 2 --run-workers 1\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "KillMode=mixed\n"
        "KillSignal=SIGTERM\n"
        "TimeoutStopSec=39\n"
        "UMask=0077\n"
        "StandardOutput=journal\n"
        "StandardError=journal\n"
        "SyslogIdentifier=factory\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def test_the_stop_timeout_outlasts_the_stop_grace_and_runserves_own_wait(settings, tmp_path):
    settings.FACTORY_STOP_GRACE_SECONDS = 100
    render("--out", str(tmp_path / "unit.service"))
    text = (tmp_path / "unit.service").read_text()
    expected = 100 + KILL_GRACE_SECONDS + KEEPER_EXIT_SECONDS + 10 + 5
    assert f"\nTimeoutStopSec={int(expected + 0.999)}\n" in text
    assert expected > 100 + 5


def test_rendering_twice_is_byte_stable(tmp_path):
    out = tmp_path / "factory-runserve.service"
    assert render("--out", str(out)) == f"wrote {out}\n"
    first = out.read_bytes()
    assert render("--out", str(out)) == f"unchanged {out}\n"
    assert out.read_bytes() == first
    assert f"ExecStart={sys.executable} {PROJECT_DIR}/manage.py runserve ".encode() in first


def test_a_relative_environment_file_is_refused(tmp_path):
    with pytest.raises(CommandError, match="--env-file must be an absolute path, not 'factory.env'"):
        render("--out", str(tmp_path / "u.service"), "--env-file", "factory.env")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_unit_passes_systemd_analyze_verify(tmp_path):
    out = tmp_path / "factory-runserve.service"
    render("--out", str(out), "--user", "root")
    result = subprocess.run(["systemd-analyze", "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (0, ""), result.stdout + result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--env-file", "/tmp/x\nExecStartPre=/bin/rm -rf /"], "--env-file must not hold control characters"),
    (["--user", "a b"], "--user 'a b' is not a user or group name"),
    (["--group", "root\nUser=root"], "--group 'root\\\\nUser=root' is not a user or group name"),
    (["--bind", "nonsense"], "--bind 'nonsense' must be HOST:PORT"),
    (["--bind", "127.0.0.1:7522 --demo"], "--bind '127.0.0.1:7522 --demo' must be HOST:PORT"),
    (["--env-file", "factory.env"], "--env-file must be an absolute path, not 'factory.env'"),
    (["--http-workers=0"], "--http-workers takes a whole number from 1 to 256, not 0"),
    (["--http-workers=-1"], "--http-workers takes a whole number from 1 to 256, not -1"),
    (["--run-workers=-2"], "--run-workers takes a whole number from 0 to 256, not -2"),
    (["--run-workers=100000"], "--run-workers takes a whole number from 0 to 256, not 100000"),
])
def test_an_argument_that_would_change_the_units_lines_is_refused_exit_2_and_nothing_is_written(tmp_path, args, message):
    out = tmp_path / "factory-runserve.service"
    with pytest.raises(CommandError, match=message) as refused:
        call_command("render_service_unit", "--out", str(out), *args)
    assert refused.value.returncode == 2
    assert not out.exists()
