"""How many connections each HTTP worker holds, shared between the workers of one gunicorn
server, so that a new connection goes to the worker holding fewest (docs/design.md §10,
"The HTTP server").

gunicorn's workers all wait on one listening socket and whichever wakes first accepts. A
kept-alive connection then stays with that worker for its whole life, and under a burst of
new connections the worker the kernel happens to run takes most of them: 32 clients were
seen split 25/7 over two workers, the busier one bound by its own GIL while the other
idled (docs/performance.md, "Signed intake at 32 clients"). With ``ConnectionShares`` a
worker that already holds more connections than another live worker leaves a new
connection to it for a moment (``AcceptTurn``), and takes it itself after
``ACCEPT_WAIT_SECONDS`` if nobody did, so a busy or stuck neighbour delays a connection by
at most that, and never refuses one.

The counts live in an anonymous shared memory map created when this module is imported:
gunicorn's arbiter imports the worker class before it forks its workers, so every worker
of one server sees the same map. A worker writes only its own slot (``age`` modulo
``SLOTS``: gunicorn numbers its workers in order) and the map is read without locks: a
count read mid-change is off by one connection for one decision, which costs nothing but
that decision's balance. A slot whose process is gone (a worker killed without cleaning up)
is ignored.
"""

import ctypes
import mmap
import os
import time

#: Slots in the shared map: more than any server's workers (a slot is ``age % SLOTS``).
SLOTS = 64

#: The longest a new connection waits for a less busy worker to take it, in seconds.
ACCEPT_WAIT_SECONDS = 0.05

#: How long a worker leaves its listening sockets alone before it looks again, in seconds.
ACCEPT_PAUSE_SECONDS = 0.002


class ConnectionShares:
    """``SLOTS`` pairs (pid, connections) in shared memory (the module's docstring)."""

    def __init__(self):
        self._map = mmap.mmap(-1, SLOTS * 2 * ctypes.sizeof(ctypes.c_int64))
        self._cells = (ctypes.c_int64 * (SLOTS * 2)).from_buffer(self._map)

    def claim(self, age: int, pid: int) -> int:
        """Take the slot of the worker numbered ``age`` for process ``pid``, at 0
        connections; returns the slot."""
        slot = age % SLOTS
        self._cells[2 * slot + 1] = 0
        self._cells[2 * slot] = pid
        return slot

    def release(self, slot: int, pid: int) -> None:
        """Give ``slot`` up, unless another worker has taken it since."""
        if self._cells[2 * slot] == pid:
            self._cells[2 * slot] = 0

    def publish(self, slot: int, connections: int) -> None:
        """Say that the worker in ``slot`` now holds ``connections``."""
        self._cells[2 * slot + 1] = connections

    def fewest_elsewhere(self, slot: int) -> int | None:
        """The fewest connections any other live worker holds; None when there is none."""
        fewest = None
        for other in range(SLOTS):
            pid = self._cells[2 * other]
            if other == slot or pid == 0:
                continue
            connections = self._cells[2 * other + 1]
            if (fewest is None or connections < fewest) and _alive(pid):
                fewest = connections
        return fewest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class AcceptTurn:
    """Whether a worker takes a waiting connection now or leaves it to a less busy one.

    ``decide(mine, fewest_elsewhere, now)`` → ``True`` to accept. A worker holding more
    connections than ``fewest_elsewhere`` leaves the connection alone, for at most
    ``ACCEPT_WAIT_SECONDS`` counted from the first time it did so in a row: pauses more than
    ``5 × ACCEPT_PAUSE_SECONDS`` apart start a new wait. ``now``: monotonic seconds.
    """

    def __init__(self, wait_seconds: float = ACCEPT_WAIT_SECONDS, pause_seconds: float = ACCEPT_PAUSE_SECONDS):
        self.wait_seconds = wait_seconds
        self.pause_seconds = pause_seconds
        self._waiting_since: float | None = None
        self._last_pause: float | None = None

    def decide(self, mine: int, fewest_elsewhere: int | None, now: float) -> bool:
        if fewest_elsewhere is None or mine <= fewest_elsewhere:
            self._waiting_since = None
            return True
        if self._waiting_since is None or now - self._last_pause > 5 * self.pause_seconds:
            self._waiting_since = now
        if now - self._waiting_since >= self.wait_seconds:
            self._waiting_since = None
            return True
        self._last_pause = now
        return False


#: This server's map: created in the arbiter, inherited by every worker it forks.
SHARES = ConnectionShares()


class BalancedAccept:
    """A mixin for gunicorn's gthread worker (listed before ``ThreadWorker``): publishes the
    worker's connection count in ``SHARES`` and leaves a new connection to a worker holding
    fewer, for at most ``ACCEPT_WAIT_SECONDS`` (the module's docstring). The worker calls
    ``serve_sharing`` around gthread's ``init_process`` and asks ``may_accept`` first in
    its ``accept``."""

    _share_slot: int | None = None
    _paused_until: float | None = None

    @property
    def nr_conns(self) -> int:
        return self._nr_conns

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        # gthread counts a worker's connections here; every change is published to the
        # other workers (set in the arbiter too, before the worker has a slot).
        self._nr_conns = value
        if self._share_slot is not None:
            SHARES.publish(self._share_slot, value)

    def serve_sharing(self, serve) -> None:
        """Run ``serve()`` (gthread's ``init_process``: the worker's whole life) holding a slot."""
        self.accept_turn = AcceptTurn()
        self._share_slot = SHARES.claim(self.age, self.pid)
        try:
            serve()
        finally:
            SHARES.release(self._share_slot, self.pid)

    def may_accept(self) -> bool:
        """Whether to accept now; if not, stop listening for ``AcceptTurn.pause_seconds``."""
        now = time.monotonic()
        if self.accept_turn.decide(self.nr_conns, SHARES.fewest_elsewhere(self._share_slot), now):
            return True
        self.set_accept_enabled(False)
        self._paused_until = now + self.accept_turn.pause_seconds
        return False

    def set_accept_enabled(self, enabled):
        # gthread's loop turns accepting back on whenever it has room; not during a pause.
        if enabled and self._paused_until is not None:
            if time.monotonic() < self._paused_until:
                return
            self._paused_until = None
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout):
        if self._paused_until is not None:
            timeout = min(timeout, max(self._paused_until - time.monotonic(), 0.0))
        super().wait_for_and_dispatch_events(timeout)
