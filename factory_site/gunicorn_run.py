"""``runserve``'s HTTP server: gunicorn's own command line (``python -m factory_site.gunicorn_run``
takes the options of ``python -m gunicorn``) with an arbiter that wakes every ``IDLE_WAKE_SECONDS``
instead of every second when no signal comes.

gunicorn's arbiter (its master process) waits for a signal at most a second, then checks its
workers' heartbeats and their number. Every event it acts on is a signal, which wakes it at
once: a worker that exits (SIGCHLD), a stop (SIGTERM, SIGINT, SIGQUIT), a reload (SIGHUP),
more or fewer workers (SIGTTIN, SIGTTOU). What the timer alone finds is a worker that stopped
telling it it lives, which it gives ``--timeout`` (30 s) anyway; checking every 5 s instead of
every second kills such a worker 35 s after its last word at most, instead of 31. A wake-up
costs an idle process about a quarter of a millisecond of CPU on a quiet host
(docs/performance.md, "An idle second").
"""

from gunicorn.app import base
from gunicorn.app.wsgiapp import run
from gunicorn.arbiter import Arbiter

#: How long the arbiter waits for a signal, in seconds (gunicorn: 1), at most a sixth of
#: ``--timeout`` (its workers' heartbeat time-out).
IDLE_WAKE_SECONDS = 5.0


class QuietArbiter(Arbiter):
    """gunicorn's arbiter, waking every ``IDLE_WAKE_SECONDS`` when no signal comes."""

    def wait_for_signals(self, timeout=1.0):
        return super().wait_for_signals(timeout=max(timeout, min(IDLE_WAKE_SECONDS, self.timeout / 6)))


def main() -> None:
    """gunicorn's command line with ``QuietArbiter`` (its application makes its arbiter from
    ``gunicorn.app.base.Arbiter``, the one name this replaces)."""
    base.Arbiter = QuietArbiter
    run(prog="gunicorn")


if __name__ == "__main__":
    main()
