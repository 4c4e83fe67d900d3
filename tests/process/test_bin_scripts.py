"""The README's commands as a new user runs them (README, "Quick start")."""

import subprocess

from tests.conftest import PROJECT_DIR


def test_serve_help_shows_the_options_and_touches_no_database(tmp_path):
    database = tmp_path / "never.sqlite3"
    done = subprocess.run(
        [str(PROJECT_DIR / "bin" / "serve"), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DATABASE_URL": f"sqlite:///{database}",
             "FACTORY_VAR_DIR": str(tmp_path / "var"), "DJANGO_SECRET_KEY": "bin-scripts-test-key"},
    )
    assert done.returncode == 0, done.stderr
    assert "usage: manage.py runserve" in done.stdout and "--bind" in done.stdout
    assert not database.exists()
    assert "Operations to perform" not in done.stdout  # no migrate ran
