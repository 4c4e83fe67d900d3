"""Statements per operation, counted in the bench's own process (issue 29, "round trips, counted").

Not a test. A bench that has Django set up on its database counts what one operation sends
to it with ``counting()``: every statement Django's cursors execute (an ``execute_wrapper``
on this thread's connection: the ORM's, plain SQL's and ``prepared_cursor``'s alike), the
commits of explicit transactions, and Django's health checks of the connection
(``CONN_HEALTH_CHECKS``: a ``SELECT 1`` that goes around the wrappers). From them
``round_trips`` is what a database one network round trip away costs the operation: on
PostgreSQL each statement, each health check, and an explicit transaction's ``BEGIN`` (which
psycopg sends before its first statement) and ``COMMIT``; on SQLite, in the process, the
statements (``BEGIN`` among them: Django sends it through a cursor) and the commits.

``door_counts`` measures a signed ``POST /events`` through Django's request handling (the
test client: every middleware and the view, the door's group commit); ``bench/intake_bench.py``
runs it as ``statements.py door`` in the bench's environment and prints its table.
"""

import json
import os
import statistics
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402

sys.path.insert(0, str(bench_env.BASE_DIR))


@dataclass
class Count:
    """What one operation sent (``counting``): statements by phase and verb, commits, health checks."""

    vendor: str
    phase: str = "all"
    statements: Counter = field(default_factory=Counter)
    commits: Counter = field(default_factory=Counter)
    health_checks: int = 0
    #: ``(phase, the statement's first 160 characters)`` in order, for a reader who asks which.
    texts: list = field(default_factory=list)

    def total(self, phase: str | None = None) -> int:
        """Statements of ``phase`` (every phase when None)."""
        return sum(n for (p, _), n in self.statements.items() if phase is None or p == phase)

    def round_trips(self, phase: str | None = None) -> int:
        """Statements + commits (+ ``BEGIN``s on PostgreSQL) + health checks of ``phase``."""
        commits = sum(n for p, n in self.commits.items() if phase is None or p == phase)
        begins = commits if self.vendor == "postgresql" else 0
        return self.total(phase) + commits + begins + (self.health_checks if phase is None else 0)

    def verbs(self, phase: str | None = None) -> str:
        """``"SELECT 1, INSERT 2"``: the statements of ``phase`` by their first word."""
        by_verb = Counter()
        for (p, verb), n in self.statements.items():
            if phase is None or p == phase:
                by_verb[verb] += n
        return ", ".join(f"{verb} {n}" for verb, n in sorted(by_verb.items())) or "none"


@contextmanager
def counting():
    """Count what this thread's default connection sends inside the block (a ``Count``; set its
    ``phase`` to split the count)."""
    from django.db import connections

    wrapper = connections["default"]
    count = Count(vendor=wrapper.vendor)

    def statement(execute, sql, params, many, context):
        count.statements[(count.phase, sql.lstrip().split(None, 1)[0].upper())] += 1
        count.texts.append((count.phase, " ".join(sql.split())[:160]))
        return execute(sql, params, many, context)

    commit, usable = wrapper._commit, wrapper.is_usable

    def counted_commit():
        count.commits[count.phase] += 1
        return commit()

    def counted_usable():
        count.health_checks += 1
        return usable()

    wrapper._commit, wrapper.is_usable = counted_commit, counted_usable
    try:
        with wrapper.execute_wrapper(statement):
            yield count
    finally:
        del wrapper._commit, wrapper.is_usable


def door_counts(*, requests: int = 30, group: int = 16) -> dict:
    """Statements of signed ``POST /events`` answered one at a time (each its own group
    commit: the median over ``requests``, after three not counted), of a duplicate, and of one
    group commit of ``group`` admissions (``intake.door_admission.write_admissions`` in the
    door's opening, as ``GroupCommit`` calls it)."""
    from django.conf import settings
    from django.test import Client

    from intake.door_admission import group_opening, write_admissions
    from lib.signing import sign
    from runtime.models import Door

    client = Client(HTTP_HOST="127.0.0.1")
    run = f"{os.getpid()}-{time.monotonic_ns()}"

    def envelope(event_id: str) -> dict:
        return {"schemaVersion": "factory.event/v1", "eventId": event_id, "type": "factory.triage.requested",
                "source": "bench", "subject": "factory", "occurredAt": "2026-11-30T20:59:58Z",
                "correlationId": event_id, "payload": {"repo": "factory"}}

    def post(event_id: str) -> int:
        body = json.dumps(envelope(event_id)).encode()
        timestamp = str(int(time.time()))
        answer = client.post("/events", body, content_type="application/json", HTTP_X_FACTORY_TIMESTAMP=timestamp,
                             HTTP_X_FACTORY_SIGNATURE=sign(settings.FACTORY_EVENTS_SECRET, f"{timestamp}.".encode() + body))
        return answer.status_code

    for n in range(3):
        assert post(f"door:{run}:warm{n}") == 202
    counts = []
    for n in range(requests):
        with counting() as count:
            status = post(f"door:{run}:{n}")
        assert status == 202, status
        counts.append(count)
    typical = sorted(counts, key=lambda c: c.round_trips())[len(counts) // 2]
    with counting() as duplicate:
        status = post(f"door:{run}:0")
    assert status == 200, status
    with counting() as grouped:
        with group_opening():
            answers = write_admissions([(envelope(f"door:{run}:group{n}"), Door.EVENTS) for n in range(group)])
    assert all(answer.admitted for answer in answers)
    return {
        "vendor": typical.vendor,
        "request": {"statements": typical.total(), "verbs": typical.verbs(), "roundTrips": typical.round_trips(),
                    "min": min(c.round_trips() for c in counts), "max": max(c.round_trips() for c in counts),
                    "median": statistics.median(c.round_trips() for c in counts)},
        "duplicate": {"statements": duplicate.total(), "verbs": duplicate.verbs(), "roundTrips": duplicate.round_trips()},
        "group": {"admissions": group, "statements": grouped.total(), "verbs": grouped.verbs(),
                  "roundTrips": grouped.round_trips()},
    }


#: The phases of a run's statements, in the order ``run_counts`` meets them.
RUN_PHASES = ("claim", "start", "command", "finish")


def run_counts(queue, *, runs: int = 5) -> dict:
    """Statements of the run worker's ``work_one`` on an empty queue (its idle second's
    question), and of ``runs`` runs each claimed and finished by one ``work_one`` in this
    thread, by phase (the median run): ``claim`` (``waiting_work``, which reads the clock, the lease
    sweep, ``claim_next_run``), ``start`` (the clock, ``start_run``), ``command`` (what this
    thread sends while the command runs: the lease keeper renews on its own thread, not
    counted) and ``finish`` (the clock, ``finish_run``, in ``write_while_held``). ``queue(n)``
    makes ``n`` queued runs and commits them."""
    import threading

    from runtime.services import execution

    originals = execution.execute_run, execution.start_run, execution.write_while_held
    current: list[Count] = []

    def execute_run(*args, **kwargs):
        current[-1].phase = "start"
        return originals[0](*args, **kwargs)

    def start_run(*args, **kwargs):
        started = originals[1](*args, **kwargs)
        current[-1].phase = "command"
        return started

    def write_while_held(*args, **kwargs):
        current[-1].phase = "finish"
        return originals[2](*args, **kwargs)

    stop = threading.Event()
    with counting() as idle:
        assert not execution.work_one(worker="statements-bench", stop=stop)
    queue(runs)
    execution.execute_run, execution.start_run, execution.write_while_held = execute_run, start_run, write_while_held
    counts = []
    try:
        for _ in range(runs):
            with counting() as count:
                count.phase = "claim"
                current.append(count)
                assert execution.work_one(worker="statements-bench", stop=stop)
            counts.append(count)
    finally:
        execution.execute_run, execution.start_run, execution.write_while_held = originals
    typical = sorted(counts, key=lambda c: c.round_trips())[len(counts) // 2]
    return {
        "vendor": typical.vendor, "runs": runs,
        "idle": {"statements": idle.total(), "verbs": idle.verbs(), "roundTrips": idle.round_trips()},
        **{phase: {"statements": typical.total(phase), "verbs": typical.verbs(phase),
                   "roundTrips": typical.round_trips(phase)} for phase in RUN_PHASES},
        "run": {"statements": typical.total(), "verbs": typical.verbs(), "roundTrips": typical.round_trips(),
                "min": min(c.round_trips() for c in counts), "max": max(c.round_trips() for c in counts),
                "texts": typical.texts},
    }


def run_rows(result: dict) -> list[list]:
    """``run_counts``' result as rows of ``DOOR_HEADERS``. Pure."""
    vendor = result["vendor"]
    named = {"idle": "an idle work_one (nothing queued)", "claim": "a run's claim", "start": "… its start",
             "command": "… while its command runs (this thread)", "finish": "… its finish"}
    rows = [[vendor, named[key], result[key]["statements"], result[key]["verbs"], result[key]["roundTrips"]]
            for key in ("idle", *RUN_PHASES)]
    whole = result["run"]
    rows.append([vendor, f"a whole run, claim to finish (median of {result['runs']})", whole["statements"],
                 whole["verbs"], f"{whole['roundTrips']} (min {whole['min']}, max {whole['max']})"])
    return rows


def door_rows(result: dict) -> list[list]:
    """``door_counts``' result as rows of ``DOOR_HEADERS``. Pure."""
    request, duplicate, grouped = result["request"], result["duplicate"], result["group"]
    return [
        [result["vendor"], "signed POST /events, admitted (a group of one)", request["statements"], request["verbs"],
         f"{request['roundTrips']} (min {request['min']}, max {request['max']})"],
        [result["vendor"], "signed POST /events, duplicate", duplicate["statements"], duplicate["verbs"],
         duplicate["roundTrips"]],
        [result["vendor"], f"one group commit of {grouped['admissions']} admissions", grouped["statements"],
         grouped["verbs"], f"{grouped['roundTrips']} ({grouped['roundTrips'] / grouped['admissions']:.2f} an admission)"],
    ]


DOOR_HEADERS = ["database", "operation", "statements", "by verb", "round trips"]


def main() -> None:
    if sys.argv[1:] != ["door"]:
        raise SystemExit("usage: statements.py door  (in a runtime's environment: DATABASE_URL, FACTORY_…)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "factory_site.settings")
    import django

    django.setup()
    print(json.dumps(door_counts()))


if __name__ == "__main__":
    main()
