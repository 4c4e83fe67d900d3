"""gunicorn's worker class for ``runserve``: threads, a read deadline per request, JSON errors
(docs/design.md §10, "The HTTP server").

``ReadDeadlineThreadWorker`` is gunicorn's ``gthread`` worker with these changes:

- **A request must arrive within ``FACTORY_HTTP_READ_SECONDS``** (default 5), head and body
  together, counted from its first byte. gthread gives a connection a thread once its first
  byte is there and keeps it on that thread while the head and then the body are read, so
  a client that trickles bytes would hold a thread as long as it likes. Every read of a
  request goes through ``DeadlineSocket``: past the deadline a head is answered 408
  ``{error: "request_timeout"}`` here, and a body read by a view raises
  ``RequestReadTimeout`` — a ``TimeoutError`` — which the intake doors answer 408 in
  their shape (``intake.bodies.read_body``). That answer says ``Connection: close``, and
  the connection is then closed without lingering on it.
- **A new connection waits for its first byte on the poller, not on a thread.** gthread
  hands a new connection to a thread at once, which then waits up to 5 s for the first
  byte: a few dozen idle connections every few seconds would hold every thread. Here a new
  connection joins gthread's pending connections (the poller) and gets a thread when its
  first byte arrives; one that sends nothing within ``FACTORY_HTTP_READ_SECONDS`` is
  closed. ``worker_connections`` (1,000) bounds them per worker.
- **A TLS handshake on the plain-HTTP port is closed at once**, without an answer: its
  first bytes are a TLS record (``0x16 0x03``), which no HTTP request line starts with, and
  a TLS client could not read a plain answer anyway (it used to wait for the read deadline
  and get a 408 it could not read).
- **gunicorn's own answers are JSON**: a request line, header or framing gunicorn refuses
  before Django sees it (400, 414, 431, 501, …) is answered
  ``{error: "<code>", detail}`` instead of gunicorn's HTML page.
- **A new connection goes to the worker holding fewest**: a worker holding more
  connections than another live worker of its server leaves a new one to it for a moment
  (``factory_site.connection_shares``), so kept-alive clients spread over the workers
  instead of piling onto whichever the kernel ran first.
- **An idle worker wakes every ``IDLE_WAKE_SECONDS`` (5 s), not every second**: gthread's loop
  wakes each second to time connections out and to tell the arbiter it lives; a worker holding
  no connection has nothing to time out, and the arbiter waits ``--timeout`` (30 s) for its
  word. A connection arriving wakes it at once, and so does a stop, and the arbiter's death
  (``PR_SET_PDEATHSIG``: the kernel's SIGTERM, even when the arbiter is SIGKILLed, so that the
  listening socket is given back at once). Each wake-up of an idle
  process costs a quarter of a millisecond of CPU on a quiet host (docs/performance.md, "An
  idle second").
- **A thread waits at most ``SWITCH_INTERVAL_SECONDS`` (1 ms) for the GIL**, not Python's
  5 ms: a door's group leader gives the GIL up for each statement it sends, and while it
  waited to get it back among sixteen busy threads it held SQLite's write lock (and every
  request of its group) for up to 5 ms a statement (docs/performance.md, "Signed intake").
"""

import errno
import json
import os
import selectors
import socket
import sys
import threading
import time
import uuid
from functools import partial

from django.conf import settings
from gunicorn import util
from gunicorn.workers.gthread import TConn, ThreadWorker

from factory_site.connection_shares import BalancedAccept
from lib.processes import die_with_parent

#: gunicorn's statuses → the ``error`` code of the JSON answer.
ERROR_CODES = {
    400: "bad_request",
    403: "forbidden",
    408: "request_timeout",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "request_header_fields_too_large",
    500: "internal_error",
    501: "not_implemented",
}


#: ``sys.setswitchinterval`` in an HTTP worker (the module's docstring; Python's default is 0.005).
SWITCH_INTERVAL_SECONDS = 0.001
#: How long a worker holding no connection waits on its poller, in seconds (gthread: 1), at
#: most its heartbeat's time-out (gunicorn's worker ``timeout``: half of ``--timeout``).
IDLE_WAKE_SECONDS = 5.0


class RequestReadTimeout(TimeoutError):
    """The request did not arrive within the read deadline."""


class HeadReadTimeout(Exception):
    """The request's head did not arrive within the read deadline: answered 408 by the worker.

    Not an ``OSError``: gthread treats those as a broken socket and answers nothing."""


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """``gunicorn.util.write_error`` in JSON: ``{error, detail}`` with a fresh ``X-Request-Id``
    (every answer carries one: docs/design.md §10; the request was not read far enough to
    take the client's), then the connection closes."""
    body = json.dumps({"error": ERROR_CODES.get(status_int, "bad_request"), "detail": mesg or reason}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"X-Request-Id: {uuid.uuid4().hex}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    util.write_nonblock(sock, head + body)


def starts_a_tls_handshake(sock) -> bool:
    """Whether the bytes waiting on ``sock`` begin a TLS handshake record (``0x16 0x03``);
    peeked, not read. False when fewer than two bytes are there yet, or on a socket error
    (the request's own read then meets it)."""
    try:
        first = sock.recv(2, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return False
    return first == b"\x16\x03"


class DeadlineSocket:
    """A client socket whose reads of one request end at a deadline.

    ``start_request`` arms it: the deadline is set at the request's first read, ``seconds``
    later. While the head is read a late read raises ``HeadReadTimeout``, while the view
    reads the body (``in_body``) ``RequestReadTimeout``. ``end_request`` disarms it; once a
    request has run out of time every later read raises ``RequestReadTimeout`` at once, so
    nothing lingers on that client, and the gunicorn request being answered (``answering``)
    is marked to close, so its answer says ``Connection: close`` instead of promising a
    kept-alive connection. Everything else is the socket's own.
    """

    def __init__(self, sock, seconds: float):
        self._sock = sock
        self.seconds = seconds
        self.armed = self.in_body = self.expired = False
        self.deadline: float | None = None
        self.answering = None

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def start_request(self) -> None:
        self.armed, self.in_body, self.deadline = True, False, None

    def end_request(self) -> None:
        self.armed = False

    def _late(self) -> Exception:
        self.expired = True
        if self.answering is not None:
            self.answering.must_close = True
        if self.armed and not self.in_body:
            return HeadReadTimeout(f"the request head did not arrive within {self.seconds:g} s")
        return RequestReadTimeout(f"the request did not arrive within {self.seconds:g} s")

    def recv(self, size: int, *flags) -> bytes:
        if self.expired:
            raise self._late()
        if not self.armed:
            return self._sock.recv(size, *flags)
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.seconds
        remaining = self.deadline - now
        if remaining <= 0:
            raise self._late()
        previous = self._sock.gettimeout()
        if previous is None and not flags:
            # Bytes already there (the poller woke this connection for them) are taken in one
            # system call; only a read that would wait sets the socket's time-out, which costs
            # three more (two mode switches and a poll) and used to be paid by every read.
            try:
                return self._sock.recv(size, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
        self._sock.settimeout(remaining)
        try:
            return self._sock.recv(size, *flags)
        except TimeoutError:
            raise self._late() from None
        finally:
            self._sock.settimeout(previous)


class ReadDeadlineThreadWorker(BalancedAccept, ThreadWorker):
    """gthread with ``DeadlineSocket`` on every connection, JSON error answers and a
    balancing accept (the module's docstring)."""

    def init_process(self):
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        self.read_seconds = settings.FACTORY_HTTP_READ_SECONDS
        # gunicorn writes its own error answers through this function; in this worker process
        # they are JSON (the module attribute is what gunicorn's handle_error calls).
        util.write_error = write_json_error
        # Each HTTP worker keeps a process row with its clock's offset, as slot loops and
        # workers do (docs/operations.md, "Clock faults"), deleted when it stops (``run``).
        # Imported here: gunicorn may import this worker class before Django's apps are ready.
        from ops.process_rows import keep_row

        self.row_stop = threading.Event()
        self.row = keep_row("http", self.row_stop)
        # The kernel's SIGTERM when the arbiter dies, even SIGKILLed: an idle worker would see it
        # gone only at its next wake-up (``IDLE_WAKE_SECONDS``), holding the listening socket.
        die_with_parent()
        if os.getppid() != self.ppid:  # it died before the kernel was asked
            self.alive = False
        self.serve_sharing(super().init_process)

    def run(self):
        """gthread's ``run``, which ends the process (``sys.exit``); then the row goes, unless
        the arbiter died (it was killed: the worker ends at once, as the rest of its server did,
        and gives the listening socket back; its row ages out)."""
        from ops.process_rows import FORGET_SECONDS

        try:
            super().run()
        finally:
            if os.getppid() == self.ppid:
                self.row_stop.set()
                self.row.join(FORGET_SECONDS)

    def wait_for_and_dispatch_events(self, timeout):
        if not self.nr_conns:
            timeout = max(timeout, min(IDLE_WAKE_SECONDS, self.timeout))
        super().wait_for_and_dispatch_events(timeout)

    def accept(self, listener):
        if not self.may_accept():
            return
        # gunicorn 27's gthread internals (pending_conns, on_pending_socket_readable): the
        # same path it takes for a connection that sent nothing within its own 5 s wait.
        try:
            client_sock, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())
        conn.timeout = time.monotonic() + self.read_seconds
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def handle(self, conn):
        if not isinstance(conn.sock, DeadlineSocket):
            # The connection's first request: its bytes are waiting (gthread's poller said so).
            if starts_a_tls_handshake(conn.sock):
                self.log.info("Connection from %s closed: a TLS handshake on the plain-HTTP port",
                              (conn.client or ("",))[0])
                return False
            conn.sock = DeadlineSocket(conn.sock, self.read_seconds)
        conn.sock.start_request()
        try:
            return super().handle(conn)
        finally:
            conn.sock.end_request()

    def handle_request(self, req, conn):
        conn.sock.in_body, conn.sock.answering = True, req
        try:
            return super().handle_request(req, conn)
        finally:
            # gunicorn's own drain of an unread body is bounded by gunicorn.
            conn.sock.end_request()
            conn.sock.answering = None

    def handle_error(self, req, client, addr, exc):
        if isinstance(exc, HeadReadTimeout):
            self.log.warning("Request from %s dropped: %s", (addr or ("",))[0], exc)
            try:
                write_json_error(client, 408, "Request Timeout", str(exc))
            except OSError:
                self.log.debug("Failed to send the 408 answer.")
            return
        super().handle_error(req, client, addr, exc)
