"""A command's output, copied to its capture files as it comes (docs/design.md §8).

The thread that waits for a command reads its stdout and stderr itself, between its looks at
the lease: ``lib.spawner_client.pump`` waits on the command's status pipe and on both
``Capture`` pipes at once, so the command's exit is noticed as its keeper reports it and no
reader thread is started per run.
"""

import os
from collections import deque
from pathlib import Path

from .base import describe_os_error

#: How much of a pipe one read takes, in bytes.
CHUNK_BYTES = 65536


class Capture:
    """One output pipe (``fd``) copied to the open file ``out`` (at ``path``) up to ``cap`` bytes,
    then a note of the truncation, keeping a tail in ``tail`` when given one.

    A write that fails (a full disk) is noted in ``errors`` and the pipe is still read to its
    end — discarded, the tail kept — so the command is never blocked on a full pipe."""

    def __init__(self, fd: int, out, path: Path, cap: int, tail: deque | None, errors: list[str]):
        self.fd: int | None = fd
        self.out, self.path, self.cap, self.tail, self.errors = out, path, cap, tail, errors
        self.written = 0
        self.truncated = self.failed = False

    def fileno(self) -> int | None:
        """The pipe's read end, to wait on with ``select`` (None once closed)."""
        return self.fd

    def read(self) -> None:
        """Copy what the pipe holds (it is readable: this does not block); close at its end."""
        chunk = os.read(self.fd, CHUNK_BYTES)
        if not chunk:
            self.close()
            return
        if self.tail is not None:
            self.tail.extend(chunk)
        room = self.cap - self.written
        if room > 0 and not self.failed:
            self._write(chunk[:room])
            self.written += min(room, len(chunk))
        self.truncated = self.truncated or len(chunk) > room

    def _write(self, data: bytes) -> None:
        try:
            self.out.write(data)
        except OSError as exc:
            self.failed = True
            self.errors.append(describe_os_error(self.path, exc))

    def close(self) -> None:
        """Note a truncation, close the file and the pipe (once)."""
        if self.fd is None:
            return
        if self.truncated and not self.failed:
            self._write(f"\n[output truncated at {self.cap} bytes]\n".encode())
        try:
            self.out.close()
        except OSError as exc:  # the last buffered bytes, on a full disk
            if not self.failed:
                self.errors.append(describe_os_error(self.path, exc))
        os.close(self.fd)
        self.fd = None
