"""Signal handling for long-running commands (STYLE 9): SIGTERM and SIGINT set a flag."""

import signal
import threading


def stop_on_signals() -> threading.Event:
    """Return an event that SIGTERM or SIGINT sets; loops check it and sleep on it."""
    stop = threading.Event()

    def handle(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop
