"""The command shim (lib/command_shim.py): the command and everything it started die with the worker."""

import os
import signal
import subprocess
import sys
import time

import pytest

from lib import command_shim
from tests.attempts import alive
from tests.processes import wait_for

pytestmark = [pytest.mark.process, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

#: A command that double-forks a grandchild into a session of its own, then sleeps.
ESCAPER = """import os, sys, time
pids = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(pids + '.grandchild', 'w').write(str(os.getpid()))
        time.sleep(120)
    os._exit(0)
open(pids + '.command', 'w').write(str(os.getpid()))
time.sleep(120)
"""

#: A worker stand-in: starts the shim as run_command does, prints the shim's status lines, sleeps.
WORKER = """import os, subprocess, sys, time
shim, grace, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
read, write = os.pipe()
subprocess.Popen([sys.executable, '-I', shim, '--parent', str(os.getpid()), '--grace', grace,
                  '--status-fd', str(write), '--', *argv], pass_fds=(write,), start_new_session=True)
os.close(write)
with os.fdopen(read) as status:
    for line in status:
        print(line.strip(), flush=True)
time.sleep(120)
"""


def start_worker(tmp_path, grace="1"):
    pids = str(tmp_path / "pids")
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, command_shim.__file__, grace, sys.executable, "-c", ESCAPER, pids],
        stdout=subprocess.PIPE, text=True,
    )
    grandchild_file = tmp_path / "pids.grandchild"
    wait_for(lambda: grandchild_file.exists() and grandchild_file.read_text(), timeout=10, what="the grandchild")
    command = int((tmp_path / "pids.command").read_text())
    return worker, command, int(grandchild_file.read_text())


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_worker_takes_its_command_and_double_forked_descendants_along(tmp_path, sig):
    worker, command, grandchild = start_worker(tmp_path)
    try:
        assert alive(command) and alive(grandchild)
        worker.send_signal(sig)
        killed_at = time.monotonic()
        wait_for(lambda: not alive(command) and not alive(grandchild), timeout=10, what="the command and its grandchild")
        assert time.monotonic() - killed_at < 5
    finally:
        worker.kill()
        worker.communicate()


def test_the_shim_reports_the_exit_of_a_command_that_ends_by_itself(tmp_path):
    read, write = os.pipe()
    shim = subprocess.Popen(
        [sys.executable, "-I", command_shim.__file__, "--parent", str(os.getpid()), "--grace", "1",
         "--status-fd", str(write), "--", sys.executable, "-c", "import sys; sys.exit(3)"],
        pass_fds=(write,),
    )
    os.close(write)
    with os.fdopen(read) as status:
        lines = status.read().splitlines()
    assert shim.wait(timeout=10) == 0
    assert lines[0].startswith("pid ") and lines[1:] == ["exit 3"]


def test_the_shim_reports_a_command_it_cannot_start(tmp_path):
    read, write = os.pipe()
    subprocess.run(
        [sys.executable, "-I", command_shim.__file__, "--parent", str(os.getpid()), "--grace", "1",
         "--status-fd", str(write), "--", "/nonexistent/tool"],
        pass_fds=(write,), timeout=10,
    )
    os.close(write)
    with os.fdopen(read) as status:
        assert status.read() == "error /nonexistent/tool: No such file or directory\n"
