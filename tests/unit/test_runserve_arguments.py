"""``runserve``'s arguments: a worker count or an address it cannot take stops it before anything
starts, in one line naming the option and the value, exit 2 (docs/design.md §10)."""

import subprocess
import sys

import pytest

from ops.service_unit import worker_counts_refusal
from tests.conftest import PROJECT_DIR


@pytest.mark.parametrize(("http", "run", "refusal"), [
    (0, 1, "--http-workers takes a whole number from 1 to 256, not 0"),
    (-1, 1, "--http-workers takes a whole number from 1 to 256, not -1"),
    (257, 1, "--http-workers takes a whole number from 1 to 256, not 257"),
    (2, -1, "--run-workers takes a whole number from 0 to 256, not -1"),
    (2, 100000, "--run-workers takes a whole number from 0 to 256, not 100000"),
    (1, 0, None),
    (256, 256, None),
])
def test_worker_counts_out_of_their_range_are_refused_naming_the_option(http, run, refusal):
    assert worker_counts_refusal(http, run) == refusal


@pytest.mark.parametrize(("args", "line"), [
    (["--http-workers=0"], "CommandError: --http-workers takes a whole number from 1 to 256, not 0; nothing was started"),
    (["--run-workers=-3"], "CommandError: --run-workers takes a whole number from 0 to 256, not -3; nothing was started"),
    (["--bind", "garbage"], "CommandError: --bind 'garbage' must be HOST:PORT with a port from 1 to 65535, "
                            "e.g. 127.0.0.1:7522; nothing was started"),
])
def test_runserve_refuses_a_bad_argument_in_one_line_exit_2_and_starts_nothing(tmp_path, args, line):
    done = subprocess.run(
        [sys.executable, "manage.py", "runserve", *args], cwd=PROJECT_DIR, timeout=60,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "k", "DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}"},
        capture_output=True, text=True,
    )
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [line])
