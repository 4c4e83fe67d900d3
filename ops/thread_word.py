"""The word a thread gives its helper thread: its latest answer to "is there work for you?"
(docs/design.md §5, the slot loop; §8, previews; docs/performance.md, "An idle second").

Two threads that share one question to the database a second use it: the slot loop's tick
thread tells its planning thread whether an event waits to be planned or an outbox row to be
published (``ops.slot_loop``), and a worker's run thread tells its preview thread whether a
preview is open (``ops.worker``). The helper thread asks the database for itself only when
the word does not answer it, and sleeps long while it says there is nothing.
"""

import math
import threading
import time
from collections.abc import Callable

#: How long a word holds, in seconds: the teller answers every second while it is idle, so an
#: older word means it lagged or stopped answering (a burst of ticks, a command running, a
#: failing database, a hung thread) and the helper thread asks for itself again.
WORD_SECONDS = 1.5
#: How long the helper thread sleeps while a fresh word says there is nothing, in seconds: the
#: teller wakes it for work, when it gives no word (a lease held by another process, a failure,
#: a command about to run) and at a stop, so this bounds only a teller that hangs. A wake-up
#: costs an idle process about a quarter of a millisecond of CPU (docs/performance.md, "An idle
#: second").
QUIET_SECONDS = 5.0


class WorkWord:
    """The teller's latest word and the instant it was given, on ``clock`` (monotonic seconds,
    ``time.monotonic`` by default). For a helper thread whose last look began at ``looked``
    (an instant of ``clock``; minus infinity before its first):

    - it looks (``due``) when the word is older than ``WORD_SECONDS``, or says work and was
      given after ``looked``;
    - between two looks it waits on ``wanted`` (``wait``): not at all when a word of work came
      after ``looked``, ``QUIET_SECONDS`` while a fresh word says nothing, else its own second;
    - a word of work, or None ("no word: look for yourself", also the word before the first),
      sets ``wanted`` and so wakes it at once; a word of nothing does not.

    A word is replaced whole, so either thread may read it at any time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.wanted = threading.Event()
        self._word: tuple[float, bool] = (-math.inf, True)  # (instant of clock, work?)

    def tell(self, work: bool | None) -> None:
        """The teller's word, now: ``work`` wakes the helper thread, False lets it sleep, None
        wakes it to ask for itself from then on."""
        self._word = (-math.inf, True) if work is None else (self.clock(), work)
        if work is None or work:
            self.wanted.set()

    def due(self, looked: float) -> bool:
        """Whether the helper thread, whose last look began at ``looked``, looks now."""
        at, work = self._word
        return self.clock() - at > WORD_SECONDS or (work and at > looked)

    def wait_seconds(self, looked: float, otherwise: float) -> float:
        """How long the helper thread, whose last look began at ``looked``, waits for a word, in
        seconds: 0 when a word of work came after ``looked``, ``QUIET_SECONDS`` while a fresh
        word says nothing, else ``otherwise`` (its own second)."""
        at, work = self._word
        if self.clock() - at <= WORD_SECONDS:
            if work and at > looked:
                return 0.0
            if not work:
                return QUIET_SECONDS
        return otherwise

    def wait(self, looked: float, otherwise: float) -> None:
        """Sleep ``wait_seconds(looked, otherwise)``, or until a word wakes the helper thread
        (``wanted``): a word given before this call is in the wait's length, one given during it
        ends it."""
        self.wanted.clear()
        self.wanted.wait(self.wait_seconds(looked, otherwise))
