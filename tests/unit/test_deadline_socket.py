"""A request's reads under its deadline (``factory_site.http_worker.DeadlineSocket``): bytes already
there are read without touching the socket's time-out; a read that must wait waits at most until
the deadline, and leaves the socket as it found it."""

import socket
import threading

import pytest

from factory_site.http_worker import DeadlineSocket, HeadReadTimeout, RequestReadTimeout


class CountingSocket:
    """A real socket whose ``settimeout`` calls are counted."""

    def __init__(self, sock):
        self.sock, self.settimeouts = sock, []

    def __getattr__(self, name):
        return getattr(self.sock, name)

    def settimeout(self, value):
        self.settimeouts.append(value)
        self.sock.settimeout(value)


@pytest.fixture
def pair():
    server, client = socket.socketpair()
    server.setblocking(True)  # as gthread hands a connection to its thread
    yield CountingSocket(server), client
    server.close()
    client.close()


def test_bytes_already_there_are_read_without_touching_the_sockets_time_out(pair):
    server, client = pair
    client.sendall(b"POST /events HTTP/1.1\r\n")
    reads = DeadlineSocket(server, 5)
    reads.start_request()
    assert reads.recv(8192) == b"POST /events HTTP/1.1\r\n"
    assert (server.settimeouts, server.sock.gettimeout()) == ([], None)


def test_a_read_that_must_wait_gets_the_bytes_when_they_come_and_leaves_the_socket_blocking(pair):
    server, client = pair
    reads = DeadlineSocket(server, 5)
    reads.start_request()
    threading.Timer(0.2, client.sendall, [b"late bytes"]).start()
    assert reads.recv(8192) == b"late bytes"
    assert len(server.settimeouts) == 2 and 4 < server.settimeouts[0] <= 5 and server.settimeouts[1] is None
    assert server.sock.gettimeout() is None


def test_a_head_that_does_not_come_within_the_deadline_is_a_head_read_timeout_and_so_is_every_later_read(pair):
    server, _client = pair
    reads = DeadlineSocket(server, 0.2)
    reads.start_request()
    with pytest.raises(HeadReadTimeout, match="did not arrive within 0.2 s"):
        reads.recv(8192)
    assert server.sock.gettimeout() is None
    reads.in_body = True
    with pytest.raises(RequestReadTimeout):
        reads.recv(8192)


def test_a_disarmed_socket_reads_as_the_socket_does(pair):
    server, client = pair
    client.sendall(b"x")
    reads = DeadlineSocket(server, 5)
    assert reads.recv(1) == b"x"
    assert server.settimeouts == []
