"""An idle worker's preview thread takes the run thread's word instead of asking the database
(ops.worker.run_previews with a ``WorkWord``; docs/design.md §8, Previews; docs/performance.md,
"An idle second")."""

import threading
import time

from ops import worker
from ops.thread_word import WorkWord


def test_the_preview_thread_sleeps_while_the_run_threads_word_says_none_is_open_and_an_open_one_wakes_it(
    monkeypatch,
):
    calls = []
    monkeypatch.setattr(worker, "preview_one", lambda **kwargs: calls.append(kwargs["worker"]) and False)
    monkeypatch.setattr(worker, "IDLE_SLEEP_SECONDS", 0.05)
    word, stop = WorkWord(), threading.Event()
    word.tell(False)
    thread = threading.Thread(target=worker.run_previews, kwargs={"stop": stop, "word": word}, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert calls == []  # six of its own seconds passed: the word says no preview is open
    word.tell(True)
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(calls) == 1
    stop.set()
    word.wanted.set()  # run_worker's stop wakes it
    thread.join(timeout=2)
    assert thread.is_alive() is False
