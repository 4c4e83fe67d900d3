"""Benchmark: signed ``POST /events`` under ``runserve`` — admissions/s and p50/p99, with and without duplicates.

Not a test. Starts ``runserve`` (its HTTP threads, ``--http-workers`` workers, the slot loop on,
so it plans what arrives; no run workers) on a throw-away SQLite database — and on the
throw-away PostgreSQL database ``--database-url`` names, dropped and created again —
then, for each client count and duplicate fraction, runs ``bench/intake_load.py`` as a
separate process on loopback (pre-signed bodies; it reports its own CPU) and prints one
table row per run.

Each server first answers ``--warmup`` requests from the largest client count, not
counted: its HTTP threads open their persistent database connections then, not inside
the first timed run. Each timed run starts once the slot loop has planned everything
admitted before it (read from ``/metrics``), and its row says how many of the events it
admitted were still unplanned when its last answer came: planning keeps up, or the row
shows by how much it did not. The CPU column is what the run cost the server per answer:
``runserve`` and its children (HTTP workers, the slot loop planning), plus, on
PostgreSQL, the server processes of the benchmark's database. On a machine whose cores the
server, the database and the load generator share, the rate is what the cores allow: the
CPU says where they went.

**The floor** (issue 31): the same load generator, with the same clients and requests,
against ``bench/floor_app.py`` — a minimal Django app under gunicorn ``gthread`` (the same
workers × 16 threads) whose one view reads the body, checks the same signature with the
door's own functions, parses the JSON and answers 202: no database, no middleware. It runs
just before and just after each door run, in the same invocation, so the two share the
machine's state of that minute. Each row gives the door's admissions/s, the floor's answers/s
(before / after), the ratio of the door's admissions to the mean of the two floor runs
(docs/performance.md: the goal is ≥ 60 % at 32 clients), the p99 of both, and the CPU per
answer of both: the server's processes (read from ``/proc``) + the load generator's (its own
``getrusage`` over the timed part). ``--no-floor`` skips it.

    .venv/bin/python bench/intake_bench.py [--clients 8 32] [--requests 4000] [--duplicates 0 0.5]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_intake] [--no-sqlite] [--conn-max-age 0]
        [--http-workers 2] [--warmup 1000] [--no-floor] [--no-statements] [--repeat 4]

``--repeat N`` runs each client count and duplicate fraction N times in a row on the same
server, each run between two floor runs, and adds a table of the median and range of door ÷
floor: on this shared host one run moves by a quarter from the next, and a change worth a few
per cent shows only in the median of several (docs/performance.md, "Signed intake").

**Statements per operation** (issue 29): before each server starts, ``bench/statements.py door``
counts in-process, in the same environment, the statements and round trips of a signed
``POST /events`` admitted alone (a group commit of one), of a duplicate, and of one group commit of 16
admissions; a second table prints them (``--no-statements`` skips it).
"""

import argparse
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402
import statements  # noqa: E402

MANAGE = str(bench_env.BASE_DIR / "manage.py")
SECRET = "bench-events-secret"
API_TOKEN = "bench-api-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, timeout: float = 60, path: str = "/status") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args[1]} exited with {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("runserve did not answer in time")


def floor_ratio(door_per_second: float, floor_per_second: list[float]) -> float | None:
    """The door's rate over the mean of the floor's runs around it (None without a floor run)."""
    runs = [rate for rate in floor_per_second if rate > 0]
    return door_per_second / (sum(runs) / len(runs)) if runs else None


def cpu_ms_per_answer(before: float, after: float, answers: int) -> float:
    """CPU milliseconds per answer from two readings in seconds around ``answers`` answers."""
    return (after - before) * 1000 / answers if answers else 0.0


def percent(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.0%}"


def summary_rows(ratios: dict[tuple, list[float]]) -> list[list]:
    """One row per ``(database, clients, duplicates)`` run more than once: the runs, the median
    and the range of their door ÷ floor ratios (a run without a floor has none)."""
    rows = []
    for (database, clients, duplicates), runs in ratios.items():
        if len(runs) > 1:
            ordered = sorted(runs)
            rows.append([database, clients, duplicates, len(runs), percent(statistics.median(ordered)),
                         f"{percent(ordered[0])}–{percent(ordered[-1])}"])
    return rows


#: The columns of ``summary_rows``' table.
SUMMARY_HEADERS = ["database", "clients", "duplicates", "runs", "median door ÷ floor", "range"]


def start_floor(args) -> tuple[subprocess.Popen, int]:
    """``bench/floor_app.py`` on a free loopback port, ``--http-workers`` × 16 threads, once it answers."""
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
           "FLOOR_EVENTS_SECRET": SECRET}
    floor = subprocess.Popen([sys.executable, str(Path(__file__).parent / "floor_app.py"), "--bind", f"127.0.0.1:{port}",
                              "--workers", str(args.http_workers)],
                             env=env, cwd=bench_env.BASE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, floor, path="/events")
    if args.warmup:
        load(port, max(args.clients), args.warmup, 0.0)
    return floor, port


def floor_run(floor: subprocess.Popen, port: int, clients: int, requests: int) -> dict:
    """One load run against the floor: its report plus ``serverCpu`` (ms per answer)."""
    before = cpu_seconds({floor.pid})
    r = load(port, clients, requests, 0.0)
    return {**r, "serverCpu": cpu_ms_per_answer(before, cpu_seconds({floor.pid}), r["requests"])}


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def database_version(env: dict) -> str:
    code = ("import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'factory_site.settings'); "
            "django.setup(); import sys; sys.path.insert(0, 'bench'); import bench_env; "
            "print(bench_env.database_version())")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=bench_env.BASE_DIR, check=True,
                          capture_output=True, text=True).stdout.strip()


def door_statements(env: dict) -> dict:
    """``bench/statements.py door`` in the server's environment, before the server starts: the
    statements of a signed ``POST /events`` and of a group commit (``statements.door_counts``)."""
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "statements.py"), "door"], env=env,
                         cwd=bench_env.BASE_DIR, check=True, capture_output=True, text=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


#: The statement counts' rows of every database this invocation served (``door_statements``).
statement_rows: list[list] = []
#: Each run's door ÷ floor ratio, by ``(database, clients, duplicates)``, for ``summary_rows``.
ratios: dict[tuple, list[float]] = {}


def load(port: int, clients: int, requests: int, duplicates: float) -> dict:
    """One run of ``intake_load.py`` against the server on ``port``: its JSON report."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "intake_load.py"), "--url", f"http://127.0.0.1:{port}",
         "--secret", SECRET, "--clients", str(clients), "--requests", str(requests), "--duplicates", str(duplicates)],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def cpu_seconds(pids: set[int] | None = None, database: str | None = None) -> float:
    """CPU seconds (user + system) so far of the processes ``pids`` and their descendants, or
    of the PostgreSQL server's processes serving ``database`` (Linux ``/proc``). A process
    that ends between two readings drops out of the second: read over runs of processes
    that live through them."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, command)
    if database is not None:
        return sum(cpu for _, cpu, command in stats.values()
                   if command.startswith("postgres: ") and f" {database} " in command)
    tree, grown = set(pids or ()), True
    while grown:
        found = {pid for pid, (parent, _, _) in stats.items() if parent in tree} - tree
        tree |= found
        grown = bool(found)
    return sum(stats[pid][1] for pid in tree if pid in stats)


def planning_backlog(port: int) -> int:
    """``factory_planning_backlog_events`` of the server's ``/metrics``: events admitted, not yet planned."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {API_TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("factory_planning_backlog_events "):
                return int(float(line.split()[1]))
    raise SystemExit("/metrics has no factory_planning_backlog_events")


def wait_planned(port: int, timeout: float = 300) -> None:
    """Wait until the slot loop has planned every admitted event."""
    deadline = time.monotonic() + timeout
    while planning_backlog(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"the planning backlog did not drain within {timeout:.0f} s")
        time.sleep(0.5)


def serve_and_load(database_url: str | None, args, floor: subprocess.Popen | None = None,
                   floor_port: int = 0) -> list[list]:
    root = bench_env.make_root("intake-bench-")
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=0, auto=1)
    url = bench_env.prepare_database(database_url, root)
    database = urlsplit(database_url).path.lstrip("/") if database_url else None
    if args.conn_max_age is not None:
        # Persistent connections (django-environ reads these from the URL's query).
        url += f"?conn_max_age={args.conn_max_age}" + ("&conn_health_checks=true" if database_url else "")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": url, "DJANGO_SECRET_KEY": "intake-bench-secret-key",
        "FACTORY_REGISTRY_DIR": str(registry_dir), "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_RUNS_DIR": str(root / "runs"), "FACTORY_EVENTS_SECRET": SECRET,
        "FACTORY_OPERATOR_PASSWORD": "bench-operator-pass", "FACTORY_LOG_LEVEL": bench_env.LOG_LEVEL,
        "FACTORY_API_TOKEN": API_TOKEN,
    }
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v", "0"], env=env, check=True,
                   cwd=bench_env.BASE_DIR)
    version = database_version(env)
    if not args.no_statements:
        statement_rows.extend(statements.door_rows(door_statements(env)))
    port = free_port()
    log = open(root / "runserve.log", "w")  # noqa: SIM115 - held for the server's lifetime
    server = subprocess.Popen([sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}", "--run-workers", "0",
                               "--http-workers", str(args.http_workers)],
                              env=env, cwd=bench_env.BASE_DIR, stdout=log, stderr=subprocess.STDOUT)
    rows = []
    try:
        wait_listening(port, server)
        if args.warmup:
            load(port, max(args.clients), args.warmup, 0.0)
        # --repeat runs each pair again at once, on the same server: the host's speed moves by
        # half within an hour, and the median of several runs says more than any one.
        for clients, duplicates, _ in itertools.product(args.clients, args.duplicates, range(args.repeat)):
            wait_planned(port)
            load_average = os.getloadavg()[0]
            before_floor = floor_run(floor, floor_port, clients, args.requests) if floor else None
            server_before, database_before = cpu_seconds({server.pid}), cpu_seconds(database=database)
            r = load(port, clients, args.requests, duplicates)
            server_cpu = cpu_ms_per_answer(server_before, cpu_seconds({server.pid}), r["requests"])
            database_cpu = cpu_ms_per_answer(database_before, cpu_seconds(database=database), r["requests"])
            unplanned = planning_backlog(port)
            if floor:
                wait_planned(port)  # the door's planning is not the floor's load
            after_floor = floor_run(floor, floor_port, clients, args.requests) if floor else None
            floors = [f for f in (before_floor, after_floor) if f]
            generator = r["generatorCpu"] * 1000 / r["requests"]
            ratio = floor_ratio(r["admittedPerSecond"], [f["perSecond"] for f in floors])
            if ratio is not None:
                ratios.setdefault((version, clients, f"{duplicates:.0%}"), []).append(ratio)
            rows.append([
                version, clients, f"{duplicates:.0%}", r["requests"], f"{r['perSecond']:.0f}",
                f"{r['admittedPerSecond']:.0f}",
                " / ".join(f"{f['perSecond']:.0f}" for f in floors) or "—",
                percent(ratio),
                f"{r['p99']:.1f}", " / ".join(f"{f['p99']:.1f}" for f in floors) or "—",
                f"{server_cpu:.2f}" + (f" + {database_cpu:.2f}" if database else "") + f" + {generator:.2f}",
                " / ".join(f"{f['serverCpu']:.2f} + {f['generatorCpu'] * 1000 / f['requests']:.2f}" for f in floors)
                or "—",
                unplanned, f"{load_average:.2f}",
                " ".join(f"{k}:{v}" for k, v in sorted(r["statuses"].items())),
            ])
    finally:
        stop(server)
        log.close()
    return rows


#: The table's columns: the door's figures, then the floor's (before / after the door's run).
HEADERS = [
    "database", "clients", "duplicates", "requests", "door answers/s", "door admitted/s", "floor answers/s",
    "door ÷ floor", "door p99 ms", "floor p99 ms", "door CPU ms/answer: server (+ database) + generator",
    "floor CPU ms/answer: server + generator", "unplanned at end", "load (1 min)", "door statuses",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--duplicates", type=float, nargs="+", default=[0.0, 0.5])
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped and recreated)")
    parser.add_argument("--conn-max-age", type=int, help="the served database connections' age in seconds (default: FACTORY_DB_CONN_MAX_AGE, 60; 0 opens one per request)")
    parser.add_argument("--http-workers", type=int, default=2, help="runserve's --http-workers, and the floor's gunicorn workers (default 2, runserve's own)")
    parser.add_argument("--no-sqlite", action="store_true", help="only the --database-url database")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the floor (bench/floor_app.py) before and after each door run")
    parser.add_argument("--no-statements", action="store_true",
                        help="skip the count of statements per request and per group commit (bench/statements.py)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each client count and duplicate fraction, one after another; with more than "
                             "one a second table gives the median and range of door ÷ floor (default 1)")
    parser.add_argument("--warmup", type=int, default=1000,
                        help="requests each server answers before the timed runs, not counted (default 1000; 0: none)")
    args = parser.parse_args(argv)
    if min(args.clients) < 1 or args.requests < 1 or args.http_workers < 1 or args.repeat < 1:
        parser.error("--clients, --requests, --http-workers and --repeat must be at least 1")
    if not all(0 <= d < 1 for d in args.duplicates):
        parser.error("--duplicates are fractions from 0 up to (not including) 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rows = []
    floor, floor_port = start_floor(args) if not args.no_floor else (None, 0)
    try:
        for database_url in ([] if args.no_sqlite else [None]) + ([args.database_url] if args.database_url else []):
            rows += serve_and_load(database_url, args, floor, floor_port)
    finally:
        if floor:
            stop(floor)
    print(bench_env.table(HEADERS, rows))
    if summary := summary_rows(ratios):
        print("\nRuns repeated (--repeat): door ÷ floor")
        print(bench_env.table(SUMMARY_HEADERS, summary))
    if statement_rows:
        print("\nStatements per operation (bench/statements.py: counted in-process, the server not running):")
        print(bench_env.table(statements.DOOR_HEADERS, statement_rows))
    print(bench_env.machine_line(", ".join(sorted({row[0] for row in rows}))))
    bench_env.drop_database(args.database_url)


if __name__ == "__main__":
    main()
