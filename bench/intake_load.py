"""The load generator of ``bench/intake_bench.py``: signed ``POST /events`` from C clients on loopback.

Not a test. Run as its own process so that its CPU is not the server's: it pre-signs
every request — head and body, as bytes — before the clock starts (one
``factory.triage.requested`` envelope per request, eventIds unique — or, with
``--duplicates F``, a fraction F of the requests repeat an earlier eventId), then C
kept-alive connections send their share, one request at a time each, driven by one
thread's ``selectors`` loop (a thread per client cost the generator about 0.3 ms of CPU
a request, which the server's cores then lacked). Prints one JSON line: requests,
seconds, statuses, admissions/s, p50/p99 latency in ms and its own CPU seconds.

    .venv/bin/python bench/intake_load.py --url http://127.0.0.1:PORT --secret S
        [--clients 32] [--requests 4000] [--duplicates 0.0]
"""

import argparse
import json
import random
import resource
import selectors
import socket
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.signing import sign  # noqa: E402


def signed_requests(secret: str, count: int, duplicates: float) -> list[bytes]:
    """``count`` complete HTTP/1.1 requests (head and body), each signed as the bridge signs."""
    run = uuid.uuid4().hex[:8]
    timestamp = str(int(time.time()))
    rng = random.Random(7)
    ids: list[str] = []
    result = []
    for i in range(count):
        event_id = rng.choice(ids) if ids and rng.random() < duplicates else f"bench:{run}:{i}"
        ids.append(event_id)
        body = json.dumps({
            "schemaVersion": "factory.event/v1", "eventId": event_id, "type": "factory.triage.requested",
            "source": "bench", "subject": "factory", "occurredAt": "2026-11-30T20:59:58Z",
            "correlationId": event_id, "payload": {"repo": "factory"},
        }).encode()
        signature = sign(secret, f"{timestamp}.".encode() + body)
        head = (f"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nX-Factory-Timestamp: {timestamp}\r\n"
                f"X-Factory-Signature: {signature}\r\n\r\n")
        result.append(head.encode() + body)
    return result


class Client:
    """One kept-alive connection sending its share of the requests, one at a time."""

    def __init__(self, address: tuple[str, int], work: list[bytes]):
        self.address, self.work, self.sock = address, work[::-1], None  # popped from the end: sent in order
        self.received, self.started = b"", 0.0

    def connect(self, selector: selectors.BaseSelector) -> None:
        self.sock = socket.create_connection(self.address, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        selector.register(self.sock, selectors.EVENT_READ, self)

    def send_next(self, selector: selectors.BaseSelector) -> bool:
        """Send the next request (blocking briefly: a request is a few hundred bytes); False when done."""
        if not self.work:
            selector.unregister(self.sock)
            self.sock.close()
            return False
        self.received, self.started = b"", time.perf_counter()
        self.sock.setblocking(True)
        self.sock.sendall(self.work.pop())
        self.sock.setblocking(False)
        return True

    def answer(self) -> tuple[int, bool] | None:
        """Read what arrived: ``(status, close)`` once a whole answer is in, else None.
        Raises ``ConnectionError`` when the server closed the connection first."""
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before an answer")
        self.received += chunk
        head_end = self.received.find(b"\r\n\r\n")
        if head_end < 0:
            return None
        lines = self.received[:head_end].decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
        if len(self.received) - head_end - 4 < int(headers.get("content-length", 0)):
            return None
        return int(lines[0].split()[1]), headers.get("connection", "").lower() == "close"


def drive(address: tuple[str, int], shares: list[list[bytes]]) -> tuple[list[float], dict]:
    """Send every share on its own connection; the latencies (seconds) and the count of each status."""
    selector = selectors.DefaultSelector()
    latencies: list[float] = []
    statuses: dict = {}
    active = 0
    for share in shares:
        client = Client(address, share)
        client.connect(selector)
        active += client.send_next(selector)
    while active:
        for key, _ in selector.select(timeout=30):
            client = key.data
            try:
                answer = client.answer()
            except OSError:
                answer = ("error", True)
            if answer is None:
                continue
            status, close = answer
            latencies.append(time.perf_counter() - client.started)
            statuses[status] = statuses.get(status, 0) + 1
            if close and client.work:
                selector.unregister(client.sock)
                client.sock.close()
                client.connect(selector)
            active -= not client.send_next(selector)
    return latencies, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--duplicates", type=float, default=0.0)
    args = parser.parse_args()
    parts = urlsplit(args.url)
    requests = signed_requests(args.secret, args.requests, args.duplicates)
    shares = [requests[i::args.clients] for i in range(args.clients)]
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    latencies, statuses = drive((parts.hostname, parts.port), shares)
    seconds = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    ordered = sorted(latencies)
    print(json.dumps({
        "requests": len(latencies), "seconds": seconds, "statuses": {str(k): v for k, v in statuses.items()},
        "perSecond": len(latencies) / seconds, "admittedPerSecond": statuses.get(202, 0) / seconds,
        "p50": statistics.median(ordered) * 1000, "p99": ordered[int(len(ordered) * 0.99) - 1] * 1000,
        "generatorCpu": cpu,
    }))


if __name__ == "__main__":
    main()
