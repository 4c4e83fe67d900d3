"""The worker's side of the command spawner (``lib/command_spawner.py``, docs/design.md §8).

``Spawner`` starts the spawner process on first use (or ``start()``) and again when it finds
it dead; ``Spawner.spawn`` asks it for one command and returns a ``SpawnedCommand``, which
reads that command's status pipe (``pid``, ``error``, ``lost``, ``exit``) as lines come. Any
thread may call them: a request is one message, sent under a lock.
"""

import atexit
import contextlib
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from lib import command_spawner

#: How long ``Spawner.close`` waits for the spawner to exit (it does at once) before SIGKILL, in seconds.
CLOSE_SECONDS = 5


class SpawnerUnavailable(Exception):
    """The spawner took no request: it died as it was asked, twice. No command started."""


class Spawner:
    """One spawner process for the commands of this process, restarted when found dead."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._ids = itertools.count(1)
        atexit.register(self.close)

    @property
    def pid(self) -> int | None:
        """The spawner's pid while one has been started (it may have died since)."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the spawner unless it runs (once: a Python interpreter's start, about 0.1 s).
        Raises OSError when it cannot be started."""
        with self._lock:
            self._ensure()

    def close(self) -> None:
        """Stop the spawner, as the end of this process would (its keepers end their commands),
        and wait for it (SIGKILL past ``CLOSE_SECONDS``); the next request starts a new one."""
        with self._lock:
            if self._control is not None:
                self._control.close()
                self._control = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=CLOSE_SECONDS)
                except subprocess.TimeoutExpired:
                    self._discard()
                self._process = None

    def _ensure(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self._discard()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Its own session (a Ctrl-C to the worker's group is the worker's to handle) and an
            # empty environment: each command gets exactly the one its request names.
            self._process = subprocess.Popen(
                [sys.executable, "-I", command_spawner.__file__, "--control-fd", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env={}, start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._control = ours

    def _discard(self) -> None:
        """Forget a spawner that died (killed and reaped should it still be going)."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            self._process.wait()
            self._process = None

    def _send(self, message: dict, fds: list[int] = ()) -> None:
        body = json.dumps(message).encode()
        data = command_spawner.HEADER.pack(len(body)) + body
        sent = socket.send_fds(self._control, [data], list(fds))
        if sent < len(data):
            self._control.sendall(data[sent:])

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: Path, nice: int, grace: float,
              stdio: tuple[int, int, int]) -> "SpawnedCommand":
        """Ask for ``argv`` to run in ``cwd`` with exactly ``env``, ``nice`` steps nicer, with
        ``stdio`` (descriptors: stdin, stdout, stderr; the caller closes its copies) and killed
        ``grace`` seconds after SIGTERM. Raises OSError when no spawner can be started,
        ``SpawnerUnavailable`` when it died twice as it was asked."""
        status_read, status_write = os.pipe()
        try:
            with self._lock:
                request_id = next(self._ids)
                message = {"spawn": request_id, "argv": argv, "env": env, "cwd": str(cwd), "nice": nice,
                           "grace": grace}
                for _ in range(2):
                    self._ensure()
                    try:
                        self._send(message, [*stdio, status_write])
                        break
                    except OSError:  # it died since it was last asked: a new one, once
                        self._discard()
                else:
                    raise SpawnerUnavailable("the command spawner died as it was asked to start a command")
        except BaseException:
            os.close(status_read)
            raise
        finally:
            os.close(status_write)
        return SpawnedCommand(self, request_id, status_read)

    def signal_keeper(self, request_id: int, *, kill: bool) -> None:
        """Ask the spawner to SIGTERM (or SIGKILL) the keeper of ``request_id``; nothing
        when the spawner is gone (its keepers were stopped when it went)."""
        with self._lock:
            if self._control is None:
                return
            with contextlib.suppress(OSError):
                self._send({"kill" if kill else "stop": request_id})


class SpawnedCommand:
    """One command asked of the spawner: its status lines, read as they come, and its end."""

    def __init__(self, spawner: Spawner, request_id: int, status_fd: int):
        self.spawner, self.request_id = spawner, request_id
        self.lines: list[str] = []
        self._fd: int | None = status_fd
        self._buffer = b""

    def value(self, word: str) -> str | None:
        """What follows ``word`` on its first status line (``pid``, ``error``, ``exit``), or None."""
        return next((line[len(word) + 1:] for line in self.lines if line.startswith(word + " ")), None)

    @property
    def finished(self) -> bool:
        """An ``exit`` or ``error`` line came, or the status pipe closed without one (the spawner died)."""
        return self._fd is None or self._reported

    @property
    def _reported(self) -> bool:
        return self.value("exit") is not None or self.value("error") is not None

    @property
    def lost(self) -> bool:
        """The spawner died before the command was done: the keeper said so, or no one reported."""
        return "lost" in self.lines or (self._fd is None and not self._reported)

    def fileno(self) -> int | None:
        """The status pipe's read end, to wait on with ``select`` (None once ``finished``)."""
        return self._fd

    def read(self) -> None:
        """Read what the status pipe holds (it is readable: this does not block) into ``lines``."""
        data = os.read(self._fd, 4096)
        if not data:
            self.close()
            return
        *complete, self._buffer = (self._buffer + data).split(b"\n")
        self.lines.extend(line.decode("utf-8", errors="replace") for line in complete)
        if self._reported:
            self.close()

    def wait(self, timeout: float) -> bool:
        """Read status lines until ``finished`` or ``timeout`` seconds passed; returns ``finished``."""
        pump(self, [], timeout)
        return self.finished

    def stop(self) -> None:
        """SIGTERM the keeper: the command's group and descendants get TERM, KILL after the grace."""
        self.spawner.signal_keeper(self.request_id, kill=False)

    def kill(self) -> None:
        """SIGKILL the keeper and the command's process group (a keeper that did not end in time)."""
        self.spawner.signal_keeper(self.request_id, kill=True)
        command_pid = self.value("pid")
        if command_pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(command_pid), signal.SIGKILL)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def pump(command: SpawnedCommand, outputs: list, timeout: float, *, drain: bool = False) -> None:
    """Read the command's status lines and its ``outputs`` (each with ``fileno()``, None once
    closed, and ``read()``) as they come, for up to ``timeout`` seconds; return sooner once the
    command is finished — with ``drain``, once its outputs are at their end too."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = [source for source in (command, *outputs) if source.fileno() is not None]
        if command.finished and not (drain and waiting):
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        readable, _, _ = select.select(waiting, [], [], remaining)
        if not readable:
            return
        for source in readable:
            source.read()
