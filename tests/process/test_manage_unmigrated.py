"""A command run against a database that was never migrated says what to do, not a traceback
(found by review: ``inject``, ``schedule list`` and ``proposals`` printed the driver's error)."""

import subprocess
import sys

import pytest

from tests.conftest import PROJECT_DIR

ADVICE = "The database has no tables yet: run `manage.py migrate` (bin/setup does) and try again."


@pytest.mark.parametrize("command,table", [
    (["proposals"], "runtime_proposal"),
    (["schedule", "list"], "schedules_schedulestate"),
])
def test_a_command_on_an_unmigrated_database_exits_2_with_the_advice(tmp_path, command, table):
    database = tmp_path / "empty.sqlite3"
    done = subprocess.run(
        [sys.executable, str(PROJECT_DIR / "manage.py"), *command], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DATABASE_URL": f"sqlite:///{database}",
                          "FACTORY_VAR_DIR": str(tmp_path / "var"), "DJANGO_SECRET_KEY": "unmigrated-test-key"},
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-2:] == [f"no such table: {table}", ADVICE]
    assert "Traceback" not in done.stderr
