"""``render_host_timers``: launchd plists and systemd units for the enabled bridge jobs (docs/host-clock.md)."""

import io
import plistlib
import shutil
import subprocess
import sys

import pytest
from django.core.management import call_command

from tests.conftest import PROJECT_DIR

EXAMPLE = PROJECT_DIR / "config" / "factory-clocks.example.yaml"
CALENDAR_JOB = (
    "  weekday-warm:\n    at: '06:30'\n    timezone: Europe/Budapest\n    days: [mon, fri]\n    enabled: true\n"
    "    eventType: factory.warm.requested\n    payload: {repo: factory}\n"
)


def render(fmt: str, out, *extra) -> list[str]:
    stdout = io.StringIO()
    call_command("render_host_timers", "--format", fmt, "--out", str(out), *extra, stdout=stdout)
    return stdout.getvalue().splitlines()


def snapshot(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.fixture
def clocks(registry_files):
    """The Factory clocks example (only factory-triage enabled) plus an enabled calendar job."""
    registry_files.write_config("schedule.yaml", EXAMPLE.read_text() + CALENDAR_JOB)
    return registry_files


@pytest.mark.parametrize("fmt", ["launchd", "systemd"])
def test_rendering_twice_gives_identical_bytes_and_rewrites_nothing(clocks, tmp_path, fmt):
    out = tmp_path / "deploy"
    first_lines = render(fmt, out)
    first = snapshot(out)
    mtimes = {path.name: path.stat().st_mtime_ns for path in out.iterdir()}
    second_lines = render(fmt, out)
    assert snapshot(out) == first
    assert {path.name: path.stat().st_mtime_ns for path in out.iterdir()} == mtimes
    assert all(line.startswith("wrote ") for line in first_lines if line.startswith(("wrote", "unchanged")))
    assert [line.split()[0] for line in second_lines if line.startswith(("wrote", "unchanged"))] == ["unchanged"] * len(first)


def test_launchd_plists_parse_and_only_run_the_bridge_with_absolute_paths(clocks, tmp_path):
    out = tmp_path / "launchd"
    lines = render("launchd", out, "--log-dir", str(tmp_path / "logs"))
    assert sorted(snapshot(out)) == ["factory.bridge.factory-triage.plist", "factory.bridge.weekday-warm.plist"]
    triage = plistlib.loads((out / "factory.bridge.factory-triage.plist").read_bytes())
    log = str(tmp_path / "logs" / "bridge-factory-triage.log")
    assert triage == {
        "Label": "factory.bridge.factory-triage",
        "ProgramArguments": [sys.executable, str(PROJECT_DIR / "manage.py"), "bridge", "run", "factory-triage"],
        "WorkingDirectory": str(PROJECT_DIR),
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "StartInterval": 86400,
    }
    warm = plistlib.loads((out / "factory.bridge.weekday-warm.plist").read_bytes())
    assert warm["StartCalendarInterval"] == [{"Weekday": 1, "Hour": 6, "Minute": 30}, {"Weekday": 5, "Hour": 6, "Minute": 30}]
    assert "StartInterval" not in warm
    assert any(line.startswith("note: launchd fires weekday-warm at 06:30 in the Mac's own time zone") for line in lines)


def test_systemd_units_pair_a_oneshot_service_with_its_timer(clocks, tmp_path):
    out = tmp_path / "systemd"
    render("systemd", out, "--log-dir", str(tmp_path / "logs"))
    files = snapshot(out)
    assert sorted(files) == [
        "factory-bridge-factory-triage.service", "factory-bridge-factory-triage.timer",
        "factory-bridge-weekday-warm.service", "factory-bridge-weekday-warm.timer",
    ]
    service = files["factory-bridge-factory-triage.service"].decode()
    assert f"ExecStart={sys.executable} {PROJECT_DIR / 'manage.py'} bridge run factory-triage\n" in service
    assert f"StandardOutput=append:{tmp_path / 'logs' / 'bridge-factory-triage.log'}\n" in service
    assert "Type=oneshot\n" in service
    timer = files["factory-bridge-factory-triage.timer"].decode()
    assert "OnActiveSec=86400s\nOnUnitActiveSec=86400s\nUnit=factory-bridge-factory-triage.service\n" in timer
    warm = files["factory-bridge-weekday-warm.timer"].decode()
    assert "OnCalendar=Mon,Fri *-*-* 06:30:00 Europe/Budapest\nPersistent=true\n" in warm


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_units_pass_systemd_analyze_verify(clocks, tmp_path):
    out = tmp_path / "systemd"
    render("systemd", out)
    result = subprocess.run(
        ["systemd-analyze", "verify", *sorted(str(path) for path in out.iterdir())],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.strip() == ""


def test_a_path_with_spaces_or_percent_is_quoted_for_systemd(clocks, tmp_path):
    out = tmp_path / "systemd"
    render("systemd", out, "--log-dir", str(tmp_path / "my logs 100%"))
    service = (out / "factory-bridge-factory-triage.service").read_text()
    assert f'StandardOutput=append:"{tmp_path}/my logs 100%%/bridge-factory-triage.log"\n' in service


@pytest.mark.parametrize(("fmt", "names"), [
    ("launchd", ["factory.bridge.weekday-warm.plist"]),
    ("systemd", ["factory-bridge-weekday-warm.service", "factory-bridge-weekday-warm.timer"]),
])
def test_a_disabled_job_renders_nothing_and_its_stale_file_is_reported_not_deleted(clocks, tmp_path, fmt, names):
    out = tmp_path / fmt
    render(fmt, out)
    clocks.write_config("schedule.yaml", EXAMPLE.read_text() + CALENDAR_JOB.replace("enabled: true", "enabled: false"))
    (out / "README.txt").write_text("not ours")
    lines = render(fmt, out)
    assert [line for line in lines if line.startswith("stale ")] == [
        f"stale {out / name}: job weekday-warm is disabled; unload and remove it by hand (docs/host-clock.md)"
        for name in names
    ]
    assert all((out / name).exists() for name in names)
    clocks.write_config("schedule.yaml", EXAMPLE.read_text())
    assert any(line.endswith("job weekday-warm is not in config/schedule.yaml; unload and remove it by hand "
                             "(docs/host-clock.md)") for line in render(fmt, out))


def test_with_no_enabled_job_nothing_is_rendered(registry_files, tmp_path):
    lines = render("launchd", tmp_path / "out")
    assert "no enabled job in config/schedule.yaml: nothing rendered" in lines
    assert list((tmp_path / "out").iterdir()) == []


def test_an_unwritable_out_dir_is_a_clear_error(clocks, tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(CommandError, match=f"cannot write to {blocker}"):
        call_command("render_host_timers", "--format", "systemd", "--out", str(blocker))
