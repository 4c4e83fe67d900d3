"""Group commit: requests on many threads share one write (docs/design.md §3, "The signed doors").

``GroupCommit(write, opening)`` serialises calls of ``write`` and hands each one every item
waiting at that moment. A thread calls ``submit(item)``: when no write is in progress it
**leads** — it enters ``opening()`` (the doors' on SQLite: a transaction, which waits for
the write turn), only then takes every waiting item, its own included, calls
``write(batch)`` inside it on its own thread, hands each waiting thread its result and, if
more items arrived meanwhile, wakes the first of their threads to lead the next batch.
Otherwise it waits for a leader to write its item. No thread waits for a timer: a lone item
is written at once, as a batch of one, so a process serving one request at a time behaves
as if there were no grouping at all, and under load a batch holds whatever arrived during
the previous write and the wait for the next one's opening.

``write(batch)`` returns one result per item, in order; a result that is an exception is
raised in that item's thread. When ``write`` (or leaving ``opening``: the commit) raises for
a batch of several items, each is written again alone in an opening of its own, so one item
the write refuses fails only its own thread. When entering ``opening`` raises, nothing was
taken or written: every item waiting then gets that exception.
"""

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(eq=False)
class _Waiting:
    """One submitted item: unless it leads at once, its thread waits for its ``result`` or to
    ``lead`` by acquiring ``done``, created held and released once by the leader that hands
    it either (a lock, not an Event: a tenth of the cost, paid by every request)."""

    item: object
    done: threading.Lock = field(default_factory=_held_lock)
    lead: bool = False
    result: object = None


class GroupCommit:
    """Batches ``submit``ted items into calls of ``write`` (the module's docstring).

    ``write``: a list of items → a sequence of as many results (or exceptions to raise),
    called inside ``opening()`` (default: nothing around it). ``batches`` counts the calls
    of ``write`` made for whole batches, ``items`` the items they carried: ``items /
    batches`` is the mean batch.
    """

    def __init__(self, write: Callable[[list], Sequence],
                 opening: Callable[[], AbstractContextManager] = nullcontext):
        self._write = write
        self._opening = opening
        self._lock = threading.Lock()
        self._queue: list[_Waiting] = []
        self._writing = False
        self.batches = 0
        self.items = 0

    def submit(self, item):
        """Write ``item`` in the next batch and return its result (or raise its exception)."""
        waiting = _Waiting(item)
        with self._lock:
            self._queue.append(waiting)
            leading = not self._writing
            self._writing = True
        if not leading:
            # Decided under the lock, never re-read before waiting: a leader may hand this
            # item the lead (and release ``done``) before this thread gets here.
            waiting.done.acquire()
            leading = waiting.lead
        if leading:
            self._lead(waiting)
        if isinstance(waiting.result, BaseException):
            raise waiting.result
        return waiting.result

    def _lead(self, own: _Waiting) -> None:
        """Write every waiting item, then pass the lead on (or end it when nobody waits).

        ``own`` is the leading thread's item: every other item's ``done`` is released exactly
        once, by the leader that hands it its result or the lead; ``own`` needs no waking."""
        batch: list[_Waiting] = []
        try:
            results = self._write_all(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to every thread of the batch, then raised by each
            if not batch:
                self._take(batch)
            results = [exc] * len(batch)
        for waiting, result in zip(batch, results, strict=True):
            waiting.result, waiting.lead = result, False
        with self._lock:
            following = self._queue[0] if self._queue else None
            if following is None:
                self._writing = False
            else:
                following.lead = True
        for waiting in batch:
            if waiting is not own:
                waiting.done.release()
        if following is not None:
            following.done.release()

    def _take(self, batch: list[_Waiting]) -> None:
        with self._lock:
            batch.extend(self._queue)
            self._queue = []

    def _write_all(self, batch: list[_Waiting]) -> list:
        """Open, take every waiting item into ``batch`` (left empty when the opening raises),
        write them; the results, one per item of ``batch``."""
        try:
            with self._opening():
                self._take(batch)
                items = [waiting.item for waiting in batch]
                self.batches += 1
                self.items += len(items)
                return list(self._checked(items, self._write(items)))
        except Exception:
            if len(batch) < 2:
                raise
        # The batch failed as a whole: each item again alone, so only the one at fault fails.
        results = []
        for item in items:
            try:
                with self._opening():
                    results.extend(self._checked([item], self._write([item])))
            except Exception as exc:  # noqa: BLE001 - this item's own failure, raised in its thread
                results.append(exc)
        return results

    @staticmethod
    def _checked(items: list, results: Sequence) -> Sequence:
        if len(results) != len(items):
            raise ValueError(f"write returned {len(results)} results for {len(items)} items")
        return results
