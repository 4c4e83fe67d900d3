"""A connection's write turn: an exclusive ``flock`` on the database's lock file, waited for in
the kernel with a time-out (``runtime.sqlite_backend``; docs/performance.md, "SQLite: writers
wait in the kernel").

``flock`` cannot be given a time-out, so a turn that is not free is waited for by another
thread, while the connection's own thread waits at most its busy time-out for that thread's
word. That thread is the connection's **waiter**, started at its first wait and kept for the
connection's life: starting a thread for each wait cost about 110 µs of CPU, and under load
a door group waits for the turn almost every time (docs/performance.md, "Signed intake"); a
kept waiter is woken with a lock instead. A turn that comes after its taker gave up is given
back at once by the waiter.
"""

import fcntl
import os
import threading
import weakref


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


class _Waiting:
    """What a ``TurnFile`` shares with its waiter thread: the file, the taker waiting (its lock,
    released when the turn is its own), and who closes the file. Holds no reference to the
    ``TurnFile``, so a connection dropped unclosed is still collected (and its file closed)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.pid = os.getpid()
        # Reentrant: collecting an unreferenced ``TurnFile`` runs ``close`` in whichever thread
        # the collector interrupts, possibly inside this mutex.
        self.mutex = threading.RLock()
        self.ask = _held_lock()  # released to wake the waiter
        self.taker: threading.Lock | None = None
        self.busy = False  # the waiter has been asked, or is in flock
        self.thread: threading.Thread | None = None
        self.closing = False

    def close(self) -> None:
        """Close the file now, or — while the waiter is in ``flock`` on it, where closing it would
        let the number name another file — have the waiter close it when ``flock`` returns. In a
        forked child, which has no waiter, the child's copy is closed at once."""
        if os.getpid() != self.pid:
            os.close(self.fd)
            return
        with self.mutex:
            if self.closing:
                return
            self.closing = True
            waiter_has_it = self.busy
            idle_thread = self.thread is not None and not self.busy
        if not waiter_has_it:
            os.close(self.fd)
        if idle_thread:
            self.ask.release()  # to end

    def run(self) -> None:
        """The waiter: for each taker, take the turn in the kernel and hand it over, or give it
        back when nobody waits for it any more; end when the file is closed."""
        while True:
            self.ask.acquire()
            while True:
                with self.mutex:
                    if self.closing:
                        break
                    if self.taker is None:
                        self.busy = False
                        break
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                with self.mutex:
                    taker, self.taker = self.taker, None
                    if taker is not None and not self.closing:
                        self.busy = False
                        taker.release()
                        break
                # The taker gave up meanwhile (or the file is being closed): give it back and
                # look again, a new taker may be waiting.
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            with self.mutex:
                if not self.closing:
                    continue
                closes_file = self.busy
                self.busy = False
            if closes_file:
                os.close(self.fd)
            return


class TurnFile:
    """One connection's open lock file: a ``flock`` belongs to the open file, so two
    connections of one process exclude each other as two processes do. Closed with the
    connection, or when the connection is dropped unclosed (a thread that ends without
    closing its connection)."""

    def __init__(self, path: str, mode: int = 0o600):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        self.pid = os.getpid()
        self._waiting = _Waiting(self.fd)
        self.close = weakref.finalize(self, self._waiting.close)

    def take(self, timeout: float) -> bool:
        """Take the turn within ``timeout`` seconds; False when it was not given.

        Free, it is taken at once. Otherwise the waiter waits for it in ``flock`` while this
        thread waits at most ``timeout`` for the waiter's word; a turn that comes after that
        is given back by the waiter."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        waiting = self._waiting
        taker = _held_lock()
        with waiting.mutex:
            waiting.taker = taker
            wake = not waiting.busy
            waiting.busy = True
            if waiting.thread is None:
                waiting.thread = threading.Thread(target=waiting.run, name="sqlite-write-turn", daemon=True)
                waiting.thread.start()
        if wake:
            waiting.ask.release()
        if taker.acquire(timeout=timeout):
            return True
        with waiting.mutex:
            if waiting.taker is taker:
                waiting.taker = None
                return False
        return True  # handed over between the time-out and the mutex

    def give_back(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
