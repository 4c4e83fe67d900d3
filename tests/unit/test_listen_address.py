"""``runserve --bind``'s listening socket, made before anything starts (lib.listen_address)."""

import re
import socket

import pytest

from lib.listen_address import AddressTaken, listen_on, parse_bind


@pytest.mark.parametrize("bind", [
    "nonsense", "127.0.0.1:", ":7522", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x", "127.0.0.1:\u0667\u0665\u0662\u0662",
    "127.0.0.1:\u00b2", "127.0.0.1:+80", "127.0.0.1: 80",
])
def test_a_bind_that_is_not_host_and_port_is_refused(bind):
    with pytest.raises(ValueError, match=re.escape(f"--bind {bind!r} must be HOST:PORT with a port from 1 to 65535")):
        parse_bind(bind)


def test_hosts_and_ipv6_brackets_are_read():
    assert [parse_bind(b) for b in ("127.0.0.1:7522", "localhost:80", "[::1]:7522")] == [
        ("127.0.0.1", 7522), ("localhost", 80), ("::1", 7522),
    ]


def test_an_address_a_server_listens_on_is_taken_and_a_closed_one_is_free():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        bind = f"127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(AddressTaken, match=f"{bind} is in use: another runserve"):
            listen_on(bind)
    with listen_on(bind) as listener:
        assert listener.getsockname() == ("127.0.0.1", int(bind.rpartition(":")[2]))


def test_the_socket_listens_at_once_and_a_client_waits_in_its_backlog_until_accepted():
    """What "serving on" rests on: a client connecting before gunicorn accepts is queued, not refused."""
    with listen_on(f"127.0.0.1:{free_port()}") as listener:
        assert not listener.get_inheritable()
        with socket.create_connection(listener.getsockname(), timeout=2) as client:
            accepted, _ = listener.accept()
            with accepted:
                client.sendall(b"ping")
                assert accepted.recv(4) == b"ping"


def test_a_second_listener_on_the_same_address_is_refused_while_the_first_listens():
    with listen_on(f"127.0.0.1:{free_port()}") as first:
        bind = f"127.0.0.1:{first.getsockname()[1]}"
        with pytest.raises(AddressTaken, match=f"{bind} is in use"):
            listen_on(bind)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_address_not_on_this_machine_cannot_be_bound():
    with pytest.raises(ValueError, match=r"--bind '192\.0\.2\.1:7522' cannot be bound here"):
        listen_on("192.0.2.1:7522")


def test_the_ports_at_both_ends_of_the_range_are_accepted():
    assert [parse_bind(b) for b in ("127.0.0.1:1", "127.0.0.1:65535", "[::1]:1")] == [
        ("127.0.0.1", 1), ("127.0.0.1", 65535), ("::1", 1),
    ]


def test_a_host_name_this_machine_cannot_resolve_is_refused_naming_it(monkeypatch):
    asked = []

    def unknown(host, port, *args, **kwargs):
        asked.append((host, port, kwargs))
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    with pytest.raises(ValueError) as refused:
        listen_on("nowhere.invalid:7522")
    assert str(refused.value) == (
        "--bind 'nowhere.invalid:7522': 'nowhere.invalid' is not an address or host name this machine knows"
        " (Name or service not known)"
    )
    # The check asks for a stream (TCP) address: without the type, the first answer may be a
    # datagram or raw socket's, and binding one says nothing about a TCP listener.
    assert asked == [("nowhere.invalid", 7522, {"type": socket.SOCK_STREAM})]
