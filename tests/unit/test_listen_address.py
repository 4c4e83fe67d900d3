"""``runserve --bind``'s check before anything starts (lib.listen_address)."""

import socket

import pytest

from lib.listen_address import AddressTaken, ensure_free, parse_bind


@pytest.mark.parametrize("bind", ["nonsense", "127.0.0.1:", ":7522", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x"])
def test_a_bind_that_is_not_host_and_port_is_refused(bind):
    with pytest.raises(ValueError, match=f"--bind {bind!r} must be HOST:PORT with a port from 1 to 65535"):
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
            ensure_free(bind)
    ensure_free(bind)


def test_an_address_not_on_this_machine_cannot_be_bound():
    with pytest.raises(ValueError, match=r"--bind '192\.0\.2\.1:7522' cannot be bound here"):
        ensure_free("192.0.2.1:7522")


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
        ensure_free("nowhere.invalid:7522")
    assert str(refused.value) == (
        "--bind 'nowhere.invalid:7522': 'nowhere.invalid' is not an address or host name this machine knows"
        " (Name or service not known)"
    )
    # The check asks for a stream (TCP) address: without the type, the first answer may be a
    # datagram or raw socket's, and binding one says nothing about a TCP listener.
    assert asked == [("nowhere.invalid", 7522, {"type": socket.SOCK_STREAM})]
