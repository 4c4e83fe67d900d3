"""Settings read from the environment, and the start-up checks on them (STYLE 12)."""

import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError

from .conftest import PROJECT_DIR


def settings_value(expression: str, **env) -> str:
    code = f"import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'factory_site.settings'; django.setup(); from django.conf import settings; print({expression})"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_DIR, env={"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "k", **env},
        capture_output=True, text=True, check=True,
    ).stdout.strip()


def test_a_relative_sqlite_file_is_relative_to_the_project():
    name = settings_value("settings.DATABASES['default']['NAME']", DATABASE_URL="sqlite:///var/demo/x.sqlite3")
    assert name == str(PROJECT_DIR / "var" / "demo" / "x.sqlite3")


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout():
    options = settings_value("settings.DATABASES['default']['OPTIONS']", DATABASE_URL="sqlite:////tmp/x.sqlite3")
    assert "journal_mode=WAL" in options and "'timeout': 30" in options and "IMMEDIATE" in options


@pytest.mark.parametrize("events,github,message", [
    ("same-secret", "same-secret", "are the same; use two different secrets"),
    ("  ", "", "FACTORY_EVENTS_SECRET is only whitespace"),
])
def test_intake_secrets_are_checked_at_start_up(settings, events, github, message):
    settings.FACTORY_EVENTS_SECRET, settings.FACTORY_GITHUB_WEBHOOK_SECRET = events, github
    with pytest.raises(SystemCheckError, match=f"runtime.E004.*{message}"):
        call_command("check")


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["0", "-1", "99999999999999999999", "abc"])
def test_a_bad_limit_is_a_usage_error(limit):
    with pytest.raises(CommandError, match="is not between 1 and 100000|is not a whole number"):
        call_command("events", "--limit", limit)
