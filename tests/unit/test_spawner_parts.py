"""The command spawner's parts that run in the worker's process or need no keeper: a command's
status lines (``lib.spawner_client.SpawnedCommand``, ``pump``), the request's wire format
(``Spawner._send`` and ``command_spawner._receive``) and the spawner's helpers
(``_executable``, ``children_of``). The spawner itself runs in a process of its own:
tests/process/test_command_spawner.py."""

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lib import command_spawner
from lib.spawner_client import SpawnedCommand, Spawner, pump

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


class Signals:
    """A stand-in ``Spawner``: records ``signal_keeper`` calls."""

    def __init__(self):
        self.calls = []

    def signal_keeper(self, request_id, *, kill):
        self.calls.append((request_id, kill))


@pytest.fixture
def status():
    """A command on a fresh status pipe: (the command, the pipe's write end)."""
    read, write = os.pipe()
    command = SpawnedCommand(Signals(), 7, read)
    yield command, write
    command.close()
    try:
        os.close(write)
    except OSError:
        pass


def test_status_lines_are_read_as_they_come_across_partial_writes(status):
    command, write = status
    assert (command.lines, command.finished, command.lost, command.fileno() is not None) == ([], False, False, True)
    os.write(write, b"pid 12")
    command.read()
    assert command.lines == [] and command.value("pid") is None
    os.write(write, b"3\nlo")
    command.read()
    assert command.lines == ["pid 123"]
    assert command.value("pid") == "123"
    assert command.value("exit") is None and not command.finished
    os.write(write, b"st\n")
    command.read()
    assert command.lines == ["pid 123", "lost"] and command.lost and not command.finished


def test_an_exit_line_finishes_the_command_and_closes_its_pipe(status):
    command, write = status
    fd = command.fileno()
    os.write(write, b"pid 5\nexit -15\n")
    command.read()
    assert command.lines == ["pid 5", "exit -15"]
    assert (command.value("exit"), command.finished, command.lost, command.fileno()) == ("-15", True, False, None)
    with pytest.raises(OSError):
        os.fstat(fd)


def test_an_error_line_finishes_the_command(status):
    command, write = status
    os.write(write, "error nosuch: No such file or directory \xe9\n".encode())
    command.read()
    assert command.value("error") == "nosuch: No such file or directory \xe9"
    assert (command.finished, command.lost, command.fileno()) == (True, False, None)


def test_undecodable_bytes_are_replaced(status):
    command, write = status
    os.write(write, b"pid \xff1\n")
    command.read()
    assert command.lines == ["pid \ufffd1"]


def test_a_word_is_matched_whole_on_its_first_line(status):
    command, write = status
    os.write(write, b"pidfile x\npid 4\npid 9\n")
    command.read()
    assert command.value("pid") == "4"
    assert command.value("pidfile") == "x"
    assert command.value("pi") is None


def test_a_pipe_closed_without_a_report_finishes_the_command_as_lost(status):
    command, write = status
    os.write(write, b"pid 5\n")
    os.close(write)
    command.read()
    assert command.lines == ["pid 5"]
    assert command.fileno() is not None
    command.read()
    assert (command.finished, command.lost, command.fileno()) == (True, True, None)


def test_wait_reads_until_finished_and_says_so(status):
    command, write = status
    os.write(write, b"pid 5\nexit 0\n")
    assert command.wait(5) is True
    assert command.lines == ["pid 5", "exit 0"]


def test_wait_gives_up_after_its_timeout(status):
    command, write = status
    started = time.monotonic()
    assert command.wait(0.2) is False
    assert 0.15 <= time.monotonic() - started < 5
    assert command.lines == []


def test_stop_and_kill_ask_the_spawner_for_the_keeper(status):
    command, _ = status
    command.stop()
    command.kill()  # no pid line yet: nothing else to kill
    assert command.spawner.calls == [(7, False), (7, True)]


def test_kill_also_kills_the_commands_process_group(status):
    command, write = status
    process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        os.write(write, f"pid {process.pid}\n".encode())
        command.read()
        command.kill()
        assert process.wait(5) == -9
    finally:
        process.kill()
        process.wait()
    assert command.spawner.calls == [(7, True)]


class Output:
    """An output ``pump`` reads: a pipe's read end, collected."""

    def __init__(self):
        self._fd, self.write = os.pipe()
        self.data = b""

    def fileno(self):
        return self._fd

    def read(self):
        data = os.read(self._fd, 4096)
        if data:
            self.data += data
        else:
            os.close(self._fd)
            self._fd = None


def test_pump_returns_once_finished_without_waiting_for_the_outputs(status):
    command, write = status
    output = Output()
    os.write(output.write, b"partial")
    os.write(write, b"exit 0\n")
    started = time.monotonic()
    pump(command, [output], 5)
    assert time.monotonic() - started < 2
    assert command.finished
    os.close(output.write)


def test_pump_with_drain_reads_the_outputs_to_their_end(status):
    command, write = status
    output = Output()
    os.write(output.write, b"all of it")
    os.close(output.write)
    os.write(write, b"exit 0\n")
    pump(command, [output], 5, drain=True)
    assert (output.data, output.fileno(), command.finished) == (b"all of it", None, True)


def test_pump_with_drain_gives_up_after_its_timeout(status):
    command, write = status
    output = Output()
    os.write(write, b"exit 0\n")
    command.read()
    started = time.monotonic()
    pump(command, [output], 0.2, drain=True)
    assert 0.15 <= time.monotonic() - started < 5
    assert output.fileno() is not None
    os.close(output.write)
    output.read()


def test_pump_returns_at_once_when_the_time_is_up(status):
    command, write = status
    os.write(write, b"pid 1\n")
    pump(command, [], 0)
    assert command.lines == []


def request_over_a_socket(message: dict, fds: list[int]) -> tuple:
    """What ``_receive`` makes of ``message`` sent by ``Spawner._send``."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        spawner = Spawner.__new__(Spawner)
        spawner._control = ours
        sender = threading.Thread(target=spawner._send, args=(message, fds))  # a long one fills the buffer
        sender.start()
        received = command_spawner._receive(theirs)
        sender.join(10)
        assert not sender.is_alive()
        return received


def test_a_request_and_its_descriptors_arrive_whole():
    read, write = os.pipe()
    message = {"spawn": 3, "argv": ["echo", "\xe9" * 3], "env": {"A": "b"}, "cwd": "/", "nice": 2, "grace": 1.5}
    received, fds = request_over_a_socket(message, [read, write, read, write])
    try:
        assert received == message
        assert len(fds) == 4
        os.write(fds[1], b"x")
        assert os.read(fds[0], 1) == b"x"
    finally:
        for fd in (read, write, *fds):
            os.close(fd)


def test_a_request_without_descriptors_arrives_whole():
    assert request_over_a_socket({"stop": 9}, []) == ({"stop": 9}, [])


def test_a_long_request_is_read_in_pieces():
    message = {"spawn": 1, "argv": ["x" * 300_000], "env": {}}
    assert request_over_a_socket(message, []) == (message, [])


def sent_in_pieces(ours: socket.socket, pieces: list[bytes]) -> threading.Thread:
    """Send ``pieces`` a tenth of a second apart, then close the sending side."""
    def send():
        for piece in pieces:
            ours.sendall(piece)
            time.sleep(0.1)
        ours.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    return sender


def framed(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return command_spawner.HEADER.pack(len(body)) + body


def test_a_request_whose_header_comes_in_pieces_is_read_whole():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    data = framed({"kill": 2})
    with ours, theirs:
        sender = sent_in_pieces(ours, [data[:1], data[1:3], data[3:]])
        assert command_spawner._receive(theirs) == ({"kill": 2}, [])
        assert command_spawner._receive(theirs) is None
        sender.join(10)


def test_a_request_whose_body_comes_in_pieces_is_read_whole_and_the_next_after_it():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    first, second = framed({"stop": 1, "why": "x" * 40}), framed({"kill": 2})
    with ours, theirs:
        sender = sent_in_pieces(ours, [first[:20], first[20:] + second])
        assert command_spawner._receive(theirs) == ({"stop": 1, "why": "x" * 40}, [])
        assert command_spawner._receive(theirs) == ({"kill": 2}, [])
        assert command_spawner._receive(theirs) is None
        sender.join(10)


@pytest.mark.parametrize("sent", [b"", b"\x00\x00", b"\x00\x00\x00\x09{\"a\""], ids=["nothing", "half a header", "half a body"])
def test_a_worker_gone_mid_request_ends_the_requests(sent):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        ours.sendall(sent)
        ours.shutdown(socket.SHUT_WR)
        assert command_spawner._receive(theirs) is None


def test_a_request_too_long_is_refused():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        ours.sendall(command_spawner.HEADER.pack(command_spawner.MAX_REQUEST_BYTES + 1))
        with pytest.raises(ValueError, match=f"^a request of {command_spawner.MAX_REQUEST_BYTES + 1} bytes$"):
            command_spawner._receive(theirs)


def test_a_request_of_the_largest_length_is_read():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        ours.sendall(command_spawner.HEADER.pack(command_spawner.MAX_REQUEST_BYTES))
        ours.shutdown(socket.SHUT_WR)
        assert command_spawner._receive(theirs) is None  # the body never came: not refused


def test_a_reset_connection_ends_the_requests():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with theirs:
        ours.close()
        assert command_spawner._receive(theirs) is None


def test_the_executable_is_looked_up_in_the_commands_path(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "tool").mkdir()  # a directory of that name is not it
    (second / "tool").write_text("")
    (tmp_path / "third").mkdir()
    (tmp_path / "third" / "tool").write_text("")
    env = {"PATH": f"{first}:{second}:{tmp_path / 'third'}"}
    assert command_spawner._executable("tool", env) == str(second / "tool")
    assert command_spawner._executable("missing", env) == "missing"
    assert command_spawner._executable("./tool", env) == "./tool"
    assert command_spawner._executable("sub/tool", env) == "sub/tool"


@linux_only
def test_children_are_found_and_zombies_left_out_when_live():
    child = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{gone.pid}/stat").read_text().split(") ")[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        everyone = command_spawner.children_of(os.getpid())
        live = command_spawner.children_of(os.getpid(), live=True)
        assert {child.pid, gone.pid} <= set(everyone)
        assert child.pid in live and gone.pid not in live
        assert command_spawner.children_of(child.pid) == []
    finally:
        child.kill()
        child.wait()
        gone.wait()


@linux_only
def test_a_child_whose_name_holds_a_parenthesis_is_found(tmp_path):
    odd = tmp_path / "x) Z 1"
    odd.symlink_to(subprocess.check_output(["which", "sleep"], text=True).strip())
    child = subprocess.Popen([str(odd), "30"])
    try:
        assert child.pid in command_spawner.children_of(os.getpid(), live=True)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("error", [ProcessLookupError, PermissionError])
def test_kill_of_a_group_gone_or_not_ours_is_quiet(status, monkeypatch, error):
    command, write = status
    killed = []

    def killpg(pid, sig):
        killed.append((pid, sig))
        raise error

    monkeypatch.setattr(os, "killpg", killpg)
    os.write(write, b"pid 4242\n")
    command.read()
    command.kill()
    assert killed == [(4242, 9)]
    assert command.spawner.calls == [(7, True)]


def test_pump_reads_nothing_once_no_time_remains(status, monkeypatch):
    command, write = status
    os.write(write, b"pid 1\n")
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)  # the deadline is now, to the nanosecond
    pump(command, [], 0)
    assert command.lines == []


def forked(work):
    """A forked child of the test's process that computes ``work()`` (JSON): its pid and the read
    end of its result. A keeper's or the spawner's parts take over the signals, the prctl flags
    and every exit of the children of the process they run in."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            os.write(write, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def result_of(child):
    """The result of a child ``forked`` once it has exited 0."""
    pid, read = child
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read()
    _, wait_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    return json.loads(text)


def in_a_child(work):
    """``work()``'s result as computed in a child ``forked`` from the test's process."""
    return result_of(forked(work))


def kept(request, spawner):
    """The status lines of ``_keep(request)`` for a spawner of pid ``spawner``, and the children
    left to the keeper (a forked child of the test's process) once it returns."""
    read, write = os.pipe()
    stdio = [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
    with os.fdopen(write, "w", buffering=1) as status:
        command_spawner._keep(request, stdio, status, spawner)
    with os.fdopen(read) as lines:
        report = lines.read().splitlines()
    left = command_spawner.children_of(os.getpid())
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return report, left


@linux_only
def test_a_keeper_whose_spawner_is_gone_before_the_command_starts_says_so_and_starts_nothing():
    request = {"argv": ["/bin/sleep", "30"], "env": {}, "cwd": "/", "nice": 0, "grace": 1}
    # The keeper's parent is the spawner that forked it: any other pid is a spawner gone.
    report, left = in_a_child(lambda: kept(request, os.getpid()))
    assert (report, left) == (["error the spawner was gone before the command started"], [])


@linux_only
def test_a_command_whose_exit_is_never_reaped_is_reported_killed(monkeypatch):
    """No time left to wait for the command after the kill (a process in uninterruptible sleep
    outlives it): its exit is unknown and reported as ``-SIGKILL``."""
    monkeypatch.setattr(command_spawner, "KILL_WAIT_SECONDS", 0)
    monkeypatch.setattr(command_spawner, "_stop_requested", True)  # stopped before it waits
    request = {"argv": ["/bin/sleep", "30"], "env": {}, "cwd": "/", "nice": 0, "grace": 0}
    report, left = in_a_child(lambda: kept(request, os.getppid()))
    assert report == [f"pid {left[0]}", f"exit {-signal.SIGKILL}"]
    assert len(left) == 1


@linux_only
def test_reaping_goes_on_past_an_orphan_to_a_keeper_that_exited_after_it():
    """``_Keepers.reap`` takes every exited child in one call: a keeper's exit (here 3, reported
    on its status pipe, which is then closed) is not left for a later wake-up by an orphan's."""

    def reap():
        orphan = os.fork()
        if orphan == 0:
            os._exit(0)
        keeper = os.fork()
        if keeper == 0:
            os._exit(3)
        deadline = time.monotonic() + 5
        while set(command_spawner.children_of(os.getpid(), live=True)) & {orphan, keeper}:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        read, write = os.pipe()
        os.set_blocking(read, False)  # the write end left open would raise BlockingIOError
        keepers = command_spawner._Keepers()
        keepers.by_id[5] = (keeper, write)
        keepers.reap()
        left = command_spawner.children_of(os.getpid())
        return keepers.by_id, left, os.read(read, 100).decode(), os.read(read, 100).decode()

    assert in_a_child(reap) == [{}, [], "exit 3\n", ""]


@linux_only
def test_a_keeper_that_cannot_be_forked_is_an_error_on_its_status_pipe_and_the_spawner_serves_on():
    """``os.fork`` failing (EAGAIN: a process limit) closes the request's descriptors and answers
    with an ``error`` line on its status pipe (written or not: the worker may have closed it); the
    spawner reads the next request, and returns when the worker closes its end."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def serve():
        ours.close()

        def fork():
            raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

        os.fork = fork  # the child's own os module
        with theirs:
            command_spawner.serve(theirs)
        return "served"

    child = forked(serve)
    theirs.close()
    answers = []
    with ours:
        for closed in (True, False):
            status_read, status_write = os.pipe()
            out_read, out_write = os.pipe()
            if closed:
                os.close(status_read)  # the worker no longer reads: the error line raises EPIPE
            fds = [os.open(os.devnull, os.O_RDONLY), out_write, out_write, status_write]
            body = json.dumps({"spawn": 1, "argv": ["/bin/true"], "env": {}, "cwd": "/", "nice": 0, "grace": 1})
            socket.send_fds(ours, [command_spawner.HEADER.pack(len(body)) + body.encode()], fds)
            for fd in {*fds}:
                os.close(fd)
            with os.fdopen(out_read, "rb") as out:
                answers.append(out.read())  # its end once the spawner closed its copies
            if not closed:
                with os.fdopen(status_read, "rb") as status:
                    answers.append(status.read())
    assert result_of(child) == "served"
    assert answers == [b"", b"", f"error cannot start a keeper: {os.strerror(errno.EAGAIN)}\n".encode()]


@linux_only
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="starts processes of other users")
def test_signals_a_keeper_or_the_spawner_may_not_send_are_quiet():
    """A command may leave processes of another user behind (a set-user-ID program): a keeper or
    the spawner not allowed to signal them (EPERM) goes on as for a process already gone."""

    def signal_them():
        strangers = [subprocess.Popen(["sleep", "10"], user=65534, process_group=0) for _ in range(2)]
        os.setresuid(65533, 65533, 65533)  # neither root nor their user
        command_spawner._signal_all(strangers[0].pid, signal.SIGTERM, set())
        command_spawner._signal_all(strangers[0].pid, signal.SIGKILL, None)
        command_spawner._Keepers()._kill_orphans()
        return [stranger.pid for stranger in strangers]

    pids = in_a_child(signal_them)
    try:
        states = [Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] for pid in pids]
        assert len(pids) == 2 and "Z" not in states and "X" not in states
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
