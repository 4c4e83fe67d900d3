"""Settings read from the environment, each in a fresh process.

The start-up checks on them are ``unit/test_settings_checks.py``.
"""

import subprocess
import sys

from tests.conftest import PROJECT_DIR


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
