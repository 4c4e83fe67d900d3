"""The command spawner's rules one at a time (lib/command_spawner.py): each request is answered
at once, a stop or a kill reaches its own run only and leaves the spawner serving, a kill does
not wait for the grace. The spawner and its keepers run in processes of their own."""

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.attempts import alive
from tests.processes import wait_for
from tests.spawned import ESCAPER, finish, spawn

pytestmark = [pytest.mark.process, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

#: ``ESCAPER`` ignoring SIGTERM, and so its grandchild too.
STUBBORN_ESCAPER = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + ESCAPER


def sleeper(spawner):
    """A command that prints ``ready`` and sleeps; returns it once it is ready."""
    command, output = spawn(spawner, [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(120)"])
    assert output.readline() == b"ready\n"
    return command, output


def test_each_request_is_answered_at_once(spawner):
    """The spawner does not linger between reading a request and starting its command (no
    keeper ends meanwhile to wake it)."""
    spawner.start()
    started = time.monotonic()
    commands = []
    for _ in range(4):
        command, output = spawn(spawner, ["/bin/sleep", "120"])
        wait_for(lambda command=command: command.wait(0.05) or command.lines, timeout=10, what="the pid line",
                 interval=0)
        commands.append((command, output))
    assert time.monotonic() - started < 3
    for command, output in commands:
        command.stop()
        assert finish(command, output) == ([f"pid {command.value('pid')}", f"exit {-signal.SIGTERM}"], "")


def test_the_command_runs_in_its_directory(spawner, tmp_path):
    """The request's ``cwd`` is the command's working directory."""
    command, output = spawn(spawner, ["/bin/pwd"], cwd=tmp_path)
    assert finish(command, output) == ([f"pid {command.value('pid')}", "exit 0"], f"{tmp_path}\n")


def test_a_command_named_without_a_slash_is_found_in_the_path_of_its_own_environment(spawner, tmp_path):
    """A bare name is looked up in the request's ``PATH``, not the spawner's (it has none)."""
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho found\n")
    tool.chmod(0o755)
    command, output = spawn(spawner, ["tool"], env={"PATH": str(tmp_path)})
    assert finish(command, output) == ([f"pid {command.value('pid')}", "exit 0"], "found\n")


def test_a_command_whose_directory_is_missing_is_reported_and_not_started(spawner, tmp_path):
    """A ``cwd`` that cannot be entered is reported as the command's start error."""
    command, output = spawn(spawner, ["/bin/pwd"], cwd=tmp_path / "missing")
    assert finish(command, output) == (["error /bin/pwd: No such file or directory"], "")


@pytest.mark.parametrize("ending", ["stop", "kill"])
def test_a_stop_or_a_kill_ends_its_own_run_only_and_the_spawner_serves_on(spawner, ending):
    """A ``stop`` (SIGTERM, the command ends by it) or a ``kill`` reaches the keeper of its run:
    the other run goes on, and so does the spawner, which answers the next request."""
    first, first_output = sleeper(spawner)
    second, second_output = sleeper(spawner)
    pid = spawner.pid
    getattr(first, ending)()
    signalled = signal.SIGTERM if ending == "stop" else signal.SIGKILL
    assert finish(first, first_output) == ([f"pid {first.value('pid')}", f"exit {-signalled}"], "")
    assert not second.wait(0.5)
    assert second.lines == [f"pid {second.value('pid')}"]
    assert alive(int(second.value("pid")))
    third, third_output = spawn(spawner, ["/bin/sh", "-c", "exit 5"])
    assert finish(third, third_output)[0][1:] == ["exit 5"]
    assert (spawner.pid, spawner._process.poll()) == (pid, None)
    second.stop()
    assert finish(second, second_output) == ([f"pid {second.value('pid')}", f"exit {-signal.SIGTERM}"], "")


@pytest.mark.parametrize("ending", ["stop", "kill"])
def test_a_stop_or_a_kill_that_carries_descriptors_is_still_a_stop_or_a_kill(spawner, ending):
    """Descriptors that come with a request that is not a ``spawn`` are closed, not taken for a
    command's: the spawner serves on."""
    spawner.start()
    pid = spawner.pid
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]
    try:
        with spawner._lock:
            spawner._send({ending: 999}, fds)
    finally:
        for fd in fds:
            os.close(fd)
    command, output = spawn(spawner, ["/bin/sh", "-c", "exit 6"])
    assert finish(command, output) == ([f"pid {command.value('pid')}", "exit 6"], "")
    assert (spawner.pid, spawner._process.poll()) == (pid, None)


def test_a_kill_ends_what_the_command_left_in_another_session_without_waiting_for_the_grace(spawner, tmp_path):
    """``kill`` SIGKILLs the keeper: the spawner, a subreaper, SIGKILLs the command's descendants
    that the keeper leaves behind at once, though they ignore SIGTERM and the grace is long."""
    pids = str(tmp_path / "pids")
    command, output = spawn(spawner, [sys.executable, "-c", STUBBORN_ESCAPER, pids], grace=60)
    grandchild_file = tmp_path / "pids.grandchild"
    wait_for(lambda: grandchild_file.exists() and grandchild_file.read_text(), timeout=10, what="the grandchild")
    command_pid, grandchild = int((tmp_path / "pids.command").read_text()), int(grandchild_file.read_text())
    killed_at = time.monotonic()
    command.kill()
    assert finish(command, output) == ([f"pid {command_pid}", f"exit {-signal.SIGKILL}"], "")
    wait_for(lambda: not alive(command_pid) and not alive(grandchild), timeout=5, what="the command and its grandchild",
             interval=0.05)
    assert time.monotonic() - killed_at < 5


def test_a_status_line_that_utf_8_cannot_hold_is_written_with_a_replacement(spawner):
    """The status pipe is UTF-8 with replacement: an ``argv[0]`` holding a lone surrogate (a
    file name's undecodable byte) is reported with ``?`` in its place."""
    command, output = spawn(spawner, ["/nonexistent/\udcff"])
    assert finish(command, output) == (["error /nonexistent/?: No such file or directory"], "")


def test_a_keeper_that_fails_on_its_request_is_reported_as_exit_1(spawner):
    """A keeper that raises (a ``spawn`` request without its ``argv``) exits 1, which the spawner
    reports on the run's status pipe; the spawner and its other runs go on."""
    other, other_output = sleeper(spawner)
    pid = spawner.pid
    read, write = os.pipe()
    fds = [os.open(os.devnull, os.O_RDWR) for _ in range(3)] + [write]
    try:
        with spawner._lock:
            spawner._send({"spawn": 999, "env": {}, "cwd": "/", "nice": 0, "grace": 1}, fds)
    finally:
        for fd in fds:
            os.close(fd)
    with os.fdopen(read, "rb") as status:
        assert status.read() == b"exit 1\n"
    command, output = spawn(spawner, ["/bin/sh", "-c", "exit 7"])
    assert finish(command, output) == ([f"pid {command.value('pid')}", "exit 7"], "")
    assert (spawner.pid, spawner._process.poll()) == (pid, None)
    assert not other.wait(0.2)
    assert other.lines == [f"pid {other.value('pid')}"]
    other.stop()
    assert finish(other, other_output) == ([f"pid {other.value('pid')}", f"exit {-signal.SIGTERM}"], "")


#: Prints the command's descriptors open on its stdout's pipe, then on any other pipe.
DESCRIPTORS = """import os
def pipe(fd):
    try:
        return os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        return None  # the directory being listed
fds = {int(fd): pipe(fd) for fd in os.listdir('/proc/self/fd')}
print(sorted(fd for fd, name in fds.items() if name == fds[1]))
print(sorted(fd for fd, name in fds.items() if name and name.startswith('pipe:') and name != fds[1]))
"""


def test_the_command_has_its_stdio_on_0_1_and_2_only(spawner):
    """The descriptors of the request's stdin, stdout and stderr reach the command as 0, 1 and 2,
    and as no other number."""
    command, output = spawn(spawner, [sys.executable, "-c", DESCRIPTORS])
    lines, text = finish(command, output)
    assert lines == [f"pid {command.value('pid')}", "exit 0"]
    assert text.splitlines()[0] == "[1, 2]"  # 0 is /dev/null here


def test_the_command_does_not_get_the_runs_status_pipe(spawner):
    """The status pipe's write end is the keeper's: a command holding it could write status lines."""
    command, output = spawn(spawner, [sys.executable, "-c", DESCRIPTORS])
    lines, text = finish(command, output)
    assert lines == [f"pid {command.value('pid')}", "exit 0"]
    assert text.splitlines()[1] == "[]"


def test_the_command_starts_with_sigpipe_and_sigxfsz_at_their_defaults(spawner):
    """Python ignores SIGPIPE and SIGXFSZ; the command does not inherit that."""
    command, output = spawn(spawner, ["/bin/grep", "^SigIgn:", "/proc/self/status"])
    lines, text = finish(command, output)
    assert lines == [f"pid {command.value('pid')}", "exit 0"]
    ignored = int(text.split()[1], 16)
    assert [(ignored >> (sig - 1)) & 1 for sig in (signal.SIGPIPE, signal.SIGXFSZ)] == [0, 0]


#: A command that double-forks a grandchild ignoring SIGTERM, which prints ``ready``; the
#: command itself ends on SIGTERM.
LEAVES_A_STUBBORN = """import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print('ready', flush=True)
        time.sleep(120)
    os._exit(0)
time.sleep(120)
"""


def test_a_command_ended_by_the_stop_is_reported_with_its_signal_though_what_it_left_needs_sigkill(spawner):
    """The command's own exit, reaped during the grace, is the one reported, not the SIGKILL that
    ends its grandchild after it."""
    command, output = spawn(spawner, [sys.executable, "-c", LEAVES_A_STUBBORN], grace=1)
    assert output.readline() == b"ready\n"
    command.stop()
    assert finish(command, output) == ([f"pid {command.value('pid')}", f"exit {-signal.SIGTERM}"], "")


#: A command that counts the SIGTERMs it gets (a line each in ``<pids>.<who>``) and goes on, and
#: so do its child (in its group) and a double-forked grandchild (in a session of its own).
COUNTERS = """import os, signal, sys, time
pids = sys.argv[1]
def counting(who):
    def count(*_):
        fd = os.open(pids + '.' + who, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, b'TERM\\n')
        os.close(fd)
    signal.signal(signal.SIGTERM, count)
    open(pids + '.' + who + '.pid', 'w').write(str(os.getpid()))
    while True:
        time.sleep(1)
if os.fork() == 0:
    counting('child')
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        counting('grandchild')
    os._exit(0)
counting('command')
"""


def test_the_command_its_group_and_each_descendant_get_one_sigterm_then_sigkill_after_the_grace(spawner, tmp_path):
    """A stop sends SIGTERM once to the command's group and once to each descendant re-parented
    to the keeper, and SIGKILL to all that are left once the grace is over."""
    pids = str(tmp_path / "pids")
    command, output = spawn(spawner, [sys.executable, "-c", COUNTERS, pids], grace=1)
    who = ("command", "child", "grandchild")
    files = [tmp_path / f"pids.{name}.pid" for name in who]
    wait_for(lambda: all(f.exists() and f.read_text() for f in files), timeout=10, what="the three processes")
    processes = [int(f.read_text()) for f in files]
    command.stop()
    assert finish(command, output) == ([f"pid {processes[0]}", f"exit {-signal.SIGKILL}"], "")
    wait_for(lambda: not any(alive(pid) for pid in processes), timeout=5, what="the three processes", interval=0.05)
    # The group gets it once; the command and the grandchild, both a group's leader and the
    # keeper's child, are sent it twice in a row, which may arrive as one signal.
    counts = [(tmp_path / f"pids.{name}").read_text().count("TERM") for name in who]
    assert counts[1] == 1 and counts[0] in (1, 2) and counts[2] in (1, 2), counts


#: A command that answers its first SIGTERM by double-forking a grandchild into a session of its
#: own, then ignores SIGTERM. The grandchild, re-parented to the keeper after the keeper's first
#: round of SIGTERMs, writes its pid to ``<pids>.late.<pid>`` and notes the SIGTERM it gets in
#: ``<pids>.term.<pid>`` (SIGTERM blocked from the fork until its handler is set: none is lost).
LATE = """import os, signal, sys, time
pids = sys.argv[1]
def noted(*_):
    open(pids + '.term.' + str(os.getpid()), 'w').close()
    os._exit(0)
def later(*_):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, noted)
            open(pids + '.late.' + str(os.getpid()), 'w').close()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            while True:
                time.sleep(1)
        os._exit(0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
signal.signal(signal.SIGTERM, later)
print('ready', flush=True)
while True:
    time.sleep(1)
"""


def test_a_descendant_re_parented_to_the_keeper_after_the_first_sigterms_gets_one_too(spawner, tmp_path):
    """The keeper goes on sending SIGTERM through the grace to each new child, after those it has
    already signalled: the grandchild started on the stop ends by its SIGTERM, not the SIGKILL."""
    pids = str(tmp_path / "pids")
    command, output = spawn(spawner, [sys.executable, "-c", LATE, pids], grace=2)
    assert output.readline() == b"ready\n"
    command.stop()
    assert finish(command, output) == ([f"pid {command.value('pid')}", f"exit {-signal.SIGKILL}"], "")
    late = {path.name.rsplit(".", 1)[1] for path in tmp_path.glob("pids.late.*")}
    termed = {path.name.rsplit(".", 1)[1] for path in tmp_path.glob("pids.term.*")}
    assert len(late) == 1 and termed == late, (late, termed)


#: A command that starts a child in its own group; both write their pid to a file and sleep.
GROUP = """import os, sys, time
pids = sys.argv[1]
if os.fork() == 0:
    open(pids + '.child', 'w').write(str(os.getpid()))
    time.sleep(120)
open(pids + '.command', 'w').write(str(os.getpid()))
time.sleep(120)
"""


def test_a_keeper_killed_outright_has_its_commands_group_killed_whatever_other_keepers_run(spawner, tmp_path):
    """The spawner SIGKILLs the group of each child that is not a live keeper, though live keepers
    come first among its children: the command's child goes with it."""
    other, other_output = sleeper(spawner)
    pids = str(tmp_path / "pids")
    command, output = spawn(spawner, [sys.executable, "-c", GROUP, pids])
    child_file = tmp_path / "pids.child"
    wait_for(lambda: child_file.exists() and child_file.read_text(), timeout=10, what="the child")
    command_pid, child = int((tmp_path / "pids.command").read_text()), int(child_file.read_text())
    keeper = int(Path(f"/proc/{command_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(keeper, signal.SIGKILL)
    output.close()  # a child left alive would hold its write end
    assert command.wait(10)
    assert command.lines == [f"pid {command_pid}", f"exit {-signal.SIGKILL}"]
    wait_for(lambda: not alive(command_pid) and not alive(child), timeout=5, what="the command and its child",
             interval=0.05)
    assert not other.wait(0.2)
    assert other.lines == [f"pid {other.value('pid')}"]
    other.stop()
    assert finish(other, other_output) == ([f"pid {other.value('pid')}", f"exit {-signal.SIGTERM}"], "")


#: A command whose child (in the command's group) starts a grandchild in a session of its own;
#: each writes its pid to a file and sleeps.
NESTED = """import os, sys, time
pids = sys.argv[1]
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        open(pids + '.grandchild', 'w').write(str(os.getpid()))
        time.sleep(120)
    open(pids + '.child', 'w').write(str(os.getpid()))
    time.sleep(120)
open(pids + '.command', 'w').write(str(os.getpid()))
time.sleep(120)
"""


def test_a_keeper_killed_outright_has_what_its_commands_group_started_elsewhere_killed_too(spawner, tmp_path):
    """The grandchild, in a session of its own under the command's child, is re-parented to the
    spawner only when that child dies with the command's group: the spawner kills it then."""
    pids = str(tmp_path / "pids")
    command, output = spawn(spawner, [sys.executable, "-c", NESTED, pids])
    files = [tmp_path / f"pids.{name}" for name in ("command", "child", "grandchild")]
    wait_for(lambda: all(f.exists() and f.read_text() for f in files), timeout=10, what="the three processes")
    processes = [int(f.read_text()) for f in files]
    keeper = int(Path(f"/proc/{processes[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
    try:
        os.kill(keeper, signal.SIGKILL)
        output.close()  # a process left alive would hold its write end
        assert command.wait(10)
        assert command.lines == [f"pid {processes[0]}", f"exit {-signal.SIGKILL}"]
        wait_for(lambda: not any(alive(pid) for pid in processes), timeout=5, what="the three processes", interval=0.05)
    finally:
        for pid in processes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_command_that_ended_as_the_stop_came_is_reported_with_its_own_exit(spawner, tmp_path):
    """The keeper woken at once by the command's exit and a stop reports the exit it reaps."""
    command, output = spawn(spawner, [sys.executable, "-c", "import sys, time; time.sleep(0.5); sys.exit(3)"])
    wait_for(lambda: command.wait(0.05) or command.lines, timeout=10, what="the pid line", interval=0)
    command_pid = int(command.value("pid"))
    keeper = int(Path(f"/proc/{command_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(keeper, signal.SIGSTOP)
    try:
        wait_for(lambda: Path(f"/proc/{command_pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
                 timeout=10, what="the command's exit", interval=0.05)
        command.stop()
        term = 1 << (signal.SIGTERM - 1)

        def term_pending():
            status = Path(f"/proc/{keeper}/status").read_text()
            return any(int(line.split()[1], 16) & term for line in status.splitlines() if line.startswith("ShdPnd:"))

        wait_for(term_pending, timeout=10, what="the stop at the keeper", interval=0.02)
    finally:
        os.kill(keeper, signal.SIGCONT)
    assert finish(command, output) == ([f"pid {command_pid}", "exit 3"], "")


def test_a_request_the_spawner_does_not_know_ends_it_with_its_name(spawner, capfd):
    """A request neither ``spawn``, ``stop`` nor ``kill`` is a worker's bug: the spawner raises,
    naming the request's keys on its stderr (the worker's), and ends."""
    spawner.start()
    process = spawner._process
    with spawner._lock:
        spawner._send({"hello": 1, "again": 2})
    assert process.wait(10) == 1
    assert capfd.readouterr().err.splitlines()[-1] == "ValueError: a request the spawner does not know: ['again', 'hello']"


def test_a_spawner_whose_worker_closes_it_ends_its_keepers_and_exits_0(spawner, capfd):
    """Closed by its worker, the spawner SIGTERMs its keepers (their commands end) and exits 0
    without a word."""
    command, output = sleeper(spawner)
    process = spawner._process
    spawner.close()
    assert process.returncode == 0
    assert command.wait(10)
    assert command.lines[0] == f"pid {command.value('pid')}" and command.lines[-1] == f"exit {-signal.SIGTERM}"
    output.close()
    assert capfd.readouterr().err == ""


def test_a_runs_status_pipe_holds_its_pid_and_its_exit_and_nothing_more(spawner):
    """Read to its end, the status pipe of a command that exits by itself has two lines: the
    keeper's ``exit`` is the only one (a keeper that ended well gets none from the spawner)."""
    spawner.start()
    read, write = os.pipe()
    fds = [os.open(os.devnull, os.O_RDWR) for _ in range(3)] + [write]
    try:
        with spawner._lock:
            spawner._send({"spawn": 999, "argv": ["/bin/sh", "-c", "exit 4"], "env": {}, "cwd": "/", "nice": 0,
                           "grace": 1}, fds)
    finally:
        for fd in fds:
            os.close(fd)
    with os.fdopen(read, "rb") as status:
        lines = status.read().decode().splitlines()
    assert lines == [lines[0], "exit 4"] and lines[0].startswith("pid ")


def test_a_keeper_killed_outright_after_its_worker_stopped_reading_leaves_the_spawner_serving(spawner):
    """The spawner's ``exit`` for a keeper that died without reporting goes nowhere when the
    worker closed that run's status pipe: the spawner serves on."""
    command, output = sleeper(spawner)
    assert not command.wait(0.2)
    command_pid, pid = int(command.value("pid")), spawner.pid
    keeper = int(Path(f"/proc/{command_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    command.close()
    output.close()
    os.kill(keeper, signal.SIGKILL)
    wait_for(lambda: not alive(command_pid), timeout=5, what="the command", interval=0.05)
    again, again_output = spawn(spawner, ["/bin/sh", "-c", "exit 2"])
    assert finish(again, again_output) == ([f"pid {again.value('pid')}", "exit 2"], "")
    assert (spawner.pid, spawner._process.poll()) == (pid, None)
