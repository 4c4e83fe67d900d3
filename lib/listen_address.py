"""``runserve --bind HOST:PORT``: the listening socket, made by the supervisor before anything starts (docs/design.md §10).

The supervisor binds and listens on the address itself, before it starts the slot loop,
and hands the socket to gunicorn (``--bind fd://N``), which loads the application and
then accepts on it. So a second ``runserve`` on an address already served is refused
before it starts or removes anything, no other process can take the address in between,
and "serving on" is true when it is said: a client that connects while gunicorn is still
loading waits in the socket's backlog instead of being refused. The socket is bound as
gunicorn binds (``SO_REUSEADDR``, so a port whose old connections linger in ``TIME_WAIT``
is free).
"""

import errno
import socket


class AddressTaken(Exception):
    """Another process listens on the address: nothing was started."""


def parse_bind(bind: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` (``[::1]:PORT`` for IPv6). Raises ``ValueError``
    naming what is wrong."""
    host, colon, port = bind.rpartition(":")
    # ASCII digits only: ``int`` reads "٧٥٢٢" as 7522, and the address said would not be the one bound.
    if not colon or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(f"--bind {bind!r} must be HOST:PORT with a port from 1 to 65535, e.g. 127.0.0.1:7522")
    return host.removeprefix("[").removesuffix("]"), int(port)


def listen_on(bind: str, *, backlog: int = 2048) -> socket.socket:
    """A socket listening on ``bind`` (``backlog``: gunicorn's default), inheritable by no child
    unless passed. Raises ``AddressTaken`` when a socket already listens there; ``ValueError``
    when ``bind`` is malformed or cannot be bound here (an unknown host, an address not on
    this machine, a port this user may not use)."""
    host, port = parse_bind(bind)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ValueError(f"--bind {bind!r}: {host!r} is not an address or host name this machine knows ({exc.strerror})") from None
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AddressTaken(f"{bind} is in use: another runserve (or another server) listens there") from None
            raise ValueError(f"--bind {bind!r} cannot be bound here: {exc.strerror}") from None
        listener.listen(backlog)
    except BaseException:
        listener.close()
        raise
    return listener
