"""The command spawner (lib/command_spawner.py, lib/spawner_client.py): commands start without a
new interpreter, and the command and everything it started die with the worker."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.attempts import alive
from tests.conftest import PROJECT_DIR
from tests.processes import wait_for
from tests.spawned import ESCAPER, finish, spawn

pytestmark = [pytest.mark.process, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

#: A worker stand-in: asks its spawner for a command as run_command does, prints its status lines, sleeps.
WORKER = """import os, sys, time
sys.path.insert(0, sys.argv[1])
from lib.spawner_client import Spawner
read, write = os.pipe()
command = Spawner().spawn(sys.argv[2:], env={}, cwd='/', nice=0, grace=1, stdio=(write, write, write))
os.close(write)
while not command.lines:
    command.wait(0.05)
print(command.lines[0], flush=True)
time.sleep(120)
"""


def started_escaper(spawner, tmp_path, **options):
    pids = str(tmp_path / "pids")
    command, output = spawn(spawner, [sys.executable, "-c", ESCAPER, pids], **options)
    grandchild_file = tmp_path / "pids.grandchild"
    wait_for(lambda: grandchild_file.exists() and grandchild_file.read_text(), timeout=10, what="the grandchild")
    return command, output, int((tmp_path / "pids.command").read_text()), int(grandchild_file.read_text())


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_worker_takes_its_command_and_double_forked_descendants_along(tmp_path, sig):
    pids = str(tmp_path / "pids")
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(PROJECT_DIR), sys.executable, "-c", ESCAPER, pids],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        grandchild_file = tmp_path / "pids.grandchild"
        wait_for(lambda: grandchild_file.exists() and grandchild_file.read_text(), timeout=10, what="the grandchild")
        command, grandchild = int((tmp_path / "pids.command").read_text()), int(grandchild_file.read_text())
        assert worker.stdout.readline() == f"pid {command}\n"
        assert alive(command) and alive(grandchild)
        worker.send_signal(sig)
        killed_at = time.monotonic()
        wait_for(lambda: not alive(command) and not alive(grandchild), timeout=10, what="the command and its grandchild")
        assert time.monotonic() - killed_at < 5
    finally:
        worker.kill()
        worker.communicate()


def test_the_exit_of_a_command_that_ends_by_itself_is_reported_with_its_output(spawner):
    command, output = spawn(spawner, [sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    lines, text = finish(command, output)
    assert lines == [f"pid {command.value('pid')}", "exit 3"]
    assert (text, command.finished, command.lost) == ("out\n", True, False)


def test_a_command_that_cannot_start_is_reported(spawner):
    command, output = spawn(spawner, ["/nonexistent/tool"])
    assert finish(command, output) == (["error /nonexistent/tool: No such file or directory"], "")
    assert command.lost is False


def test_the_command_gets_exactly_its_environment(spawner):
    command, output = spawn(spawner, ["/usr/bin/env"], env={"TZ": "UTC", "ONLY": "this"})
    assert finish(command, output)[1] == "TZ=UTC\nONLY=this\n"


def test_the_command_runs_in_its_directory_as_much_nicer_as_asked(spawner, tmp_path):
    script = "import json, os; print(json.dumps([os.getcwd(), os.getpriority(os.PRIO_PROCESS, 0)]))"
    command, output = spawn(spawner, [sys.executable, "-c", script], nice=7, cwd=tmp_path)
    lines, text = finish(command, output)
    assert lines[1:] == ["exit 0"]
    assert json.loads(text) == [str(tmp_path), os.getpriority(os.PRIO_PROCESS, 0) + 7]


def test_what_a_command_leaves_behind_is_killed_before_its_exit_is_reported(spawner, tmp_path):
    leaver = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    open({str(tmp_path / 'left')!r}, 'w').write(str(os.getpid())); time.sleep(120)\n"
        f"while not os.path.exists({str(tmp_path / 'left')!r}): time.sleep(0.01)\n"
    )
    command, output = spawn(spawner, [sys.executable, "-c", leaver])
    lines, _ = finish(command, output)
    assert lines[1:] == ["exit 0"]
    assert not alive(int((tmp_path / "left").read_text()))


def test_a_stop_ends_the_command_and_its_grandchild_and_reports_the_signal(spawner, tmp_path):
    command, output, command_pid, grandchild = started_escaper(spawner, tmp_path)
    command.stop()
    lines, _ = finish(command, output)
    assert lines == [f"pid {command_pid}", f"exit {-signal.SIGTERM}"]
    assert not alive(command_pid) and not alive(grandchild)


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(spawner):
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    command, output = spawn(spawner, [sys.executable, "-c", stubborn], grace=0.5)
    assert output.readline() == b"ready\n"
    stopped_at = time.monotonic()
    command.stop()
    lines, _ = finish(command, output)
    assert lines[1:] == [f"exit {-signal.SIGKILL}"]
    assert 0.5 <= time.monotonic() - stopped_at < 5


def test_a_keeper_killed_outright_is_reported_and_the_spawner_kills_what_it_left(spawner, tmp_path):
    command, output, command_pid, grandchild = started_escaper(spawner, tmp_path)
    os.kill(parent_of(command_pid), signal.SIGKILL)  # as the OOM killer would
    lines, _ = finish(command, output)
    assert lines == [f"pid {command_pid}", f"exit {-signal.SIGKILL}"]
    # Both were re-parented to the spawner (a subreaper), which SIGKILLs every child not a keeper.
    wait_for(lambda: not alive(command_pid) and not alive(grandchild), timeout=5, what="the command and its grandchild",
             interval=0.05)


def test_a_kill_ends_the_keeper_and_the_commands_group_at_once(spawner):
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    command, output = spawn(spawner, [sys.executable, "-c", stubborn], grace=60)
    assert output.readline() == b"ready\n"
    command.kill()
    lines, _ = finish(command, output)
    assert lines[1:] == [f"exit {-signal.SIGKILL}"]
    # SIGKILL is delivered, not waited for: the process may take a moment to be gone.
    wait_for(lambda: not alive(int(command.value("pid"))), timeout=5, what="the command", interval=0.05)


def test_a_dead_spawner_kills_its_commands_says_so_and_the_next_command_gets_a_new_one(spawner, tmp_path):
    command, output, command_pid, grandchild = started_escaper(spawner, tmp_path)
    first = parent_of(parent_of(command_pid))  # the keeper's parent
    os.kill(first, signal.SIGKILL)
    lines, _ = finish(command, output)
    assert lines == [f"pid {command_pid}", "lost", f"exit {-signal.SIGTERM}"]
    assert command.lost is True
    assert not alive(command_pid) and not alive(grandchild)
    again, output = spawn(spawner, ["/bin/sh", "-c", "exit 4"])
    assert finish(again, output)[0][1:] == ["exit 4"]
    assert spawner.pid != first


def test_a_spawner_that_dies_before_it_starts_the_command_leaves_the_command_lost(spawner):
    spawner.start()
    os.kill(spawner.pid, signal.SIGSTOP)  # it takes the request into its socket, then dies unread
    command, output = spawn(spawner, ["/bin/true"])
    os.kill(spawner.pid, signal.SIGKILL)
    assert finish(command, output) == ([], "")
    assert command.lost is True


def test_commands_asked_from_several_threads_at_once_each_get_their_own_report(spawner):
    results = {}

    def ask(n):
        command, output = spawn(spawner, [sys.executable, "-c", f"import sys; print({n}); sys.exit({n})"])
        results[n] = finish(command, output, timeout=30)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert {n: (lines[1:], text) for n, (lines, text) in results.items()} == {
        n: ([f"exit {n}"], f"{n}\n") for n in range(8)
    }


def test_closing_waits_for_the_spawner_and_kills_one_that_does_not_end(spawner, monkeypatch):
    from lib import spawner_client

    monkeypatch.setattr(spawner_client, "CLOSE_SECONDS", 0.5)
    spawner.start()
    stuck = spawner.pid
    os.kill(stuck, signal.SIGSTOP)
    started = time.monotonic()
    spawner.close()
    assert 0.5 <= time.monotonic() - started < 5
    assert not alive(stuck)
    spawner.start()  # the next request gets a new one
    assert spawner.pid != stuck and alive(spawner.pid)


def test_a_worker_that_stopped_reading_the_status_still_has_its_command_ended_gently(spawner, tmp_path):
    marker = tmp_path / "terminated"
    polite = (f"import signal, sys, time\n"
              f"def end(*_): open({str(marker)!r}, 'w').close(); sys.exit(0)\n"
              f"signal.signal(signal.SIGTERM, end); time.sleep(120)\n")
    spawner.start()
    os.kill(spawner.pid, signal.SIGSTOP)  # the status pipe is closed before the keeper writes to it
    command, output = spawn(spawner, [sys.executable, "-c", polite])
    command.close()
    os.kill(spawner.pid, signal.SIGCONT)
    time.sleep(0.5)  # the command starts, its keeper's report goes nowhere
    command.stop()
    wait_for(marker.exists, timeout=10, what="the command's SIGTERM handler", interval=0.05)
    output.close()
