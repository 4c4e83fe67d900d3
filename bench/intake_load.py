"""The load generator of ``bench/intake_bench.py``: signed ``POST /events`` from C clients on loopback.

Not a test. Run as its own process so that its CPU is not the server's: it pre-signs
every body before the clock starts (one ``factory.triage.requested`` envelope per
request, eventIds unique — or, with ``--duplicates F``, a fraction F of the requests
repeat an earlier eventId), then C threads, each on one kept-alive connection, send
their share. Prints one JSON line: requests, seconds, statuses, admissions/s,
p50/p99 latency in ms and its own CPU seconds.

    .venv/bin/python bench/intake_load.py --url http://127.0.0.1:PORT --secret S
        [--clients 32] [--requests 4000] [--duplicates 0.0]
"""

import argparse
import http.client
import json
import random
import resource
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.signing import sign  # noqa: E402


def signed_requests(secret: str, count: int, duplicates: float) -> list[tuple[bytes, dict]]:
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
        headers = {"Content-Type": "application/json", "X-Factory-Timestamp": timestamp,
                   "X-Factory-Signature": sign(secret, f"{timestamp}.".encode() + body)}
        result.append((body, headers))
    return result


def client(host: str, port: int, work: list, latencies: list, statuses: dict, lock: threading.Lock) -> None:
    connection = http.client.HTTPConnection(host, port, timeout=30)
    for body, headers in work:
        start = time.perf_counter()
        try:
            connection.request("POST", "/events", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            status = response.status
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
        except (OSError, http.client.HTTPException):
            connection.close()
            status = "error"
        elapsed = time.perf_counter() - start
        with lock:
            latencies.append(elapsed)
            statuses[status] = statuses.get(status, 0) + 1
    connection.close()


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
    latencies: list[float] = []
    statuses: dict = {}
    lock = threading.Lock()
    threads = [threading.Thread(target=client, args=(parts.hostname, parts.port, share, latencies, statuses, lock))
               for share in shares]
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
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
