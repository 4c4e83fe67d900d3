"""Whether ``runserve --bind HOST:PORT`` can listen there, asked before anything starts (docs/design.md §10).

gunicorn binds in its own process, after the supervisor has started the slot loop and
prepared what the HTTP workers share: a second ``runserve`` on an address already served
found out only then, and on its way out removed what the first one's workers were using.
A listening socket on the address is what makes it taken: the check binds a socket as
gunicorn does (``SO_REUSEADDR``, so a port whose old connections linger in ``TIME_WAIT``
is free) and closes it at once.
"""

import errno
import socket


class AddressTaken(Exception):
    """Another process listens on the address: nothing was started."""


def parse_bind(bind: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` (``[::1]:PORT`` for IPv6). Raises ``ValueError``
    naming what is wrong."""
    host, colon, port = bind.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--bind {bind!r} must be HOST:PORT with a port from 1 to 65535, e.g. 127.0.0.1:7522")
    return host.removeprefix("[").removesuffix("]"), int(port)


def ensure_free(bind: str) -> None:
    """Raise ``AddressTaken`` when a socket already listens on ``bind``; ``ValueError`` when
    ``bind`` is malformed or cannot be bound here (an unknown host, an address not on this
    machine, a port this user may not use)."""
    host, port = parse_bind(bind)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ValueError(f"--bind {bind!r}: {host!r} is not an address or host name this machine knows ({exc.strerror})") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AddressTaken(f"{bind} is in use: another runserve (or another server) listens there") from None
            raise ValueError(f"--bind {bind!r} cannot be bound here: {exc.strerror}") from None
