"""Benchmark: the burst and idle figures of this runtime, django-celery-beat and APScheduler, in one run.

Not a test. For each database and each N (``--loops``), ``--repeat`` rounds, each round
one child process per system on a fresh throw-away database (a temporary SQLite file, or
a new PostgreSQL database created next to the one ``--postgres-url`` names and dropped
afterwards), the systems interleaved within a round. Every figure is wall time from the
instant N interval loops (one minute, all due in the same second) are due until all N are
durably recorded as fired; the table gives the median of the rounds.

- **this runtime** (``bench/ticks_bench.py --child N``): **burst** = one
  ``schedules.ticks.emit_due_ticks`` with every loop due, until the last tick is admitted
  and committed; **idle** = one whole slot-loop iteration (``ops.slot_loop.iterate``:
  registry check, ticks, outbox, planning, status row) with nothing due, median of ``IDLE_SAMPLES`` (50).
- **django-celery-beat 2** (``bench/peers_children.py celery-beat``): its
  ``DatabaseScheduler`` with N ``PeriodicTask``s on one 60 s ``IntervalSchedule``, built
  and warmed (initial read, heap) before they fall due; **burst** = ``tick()`` called as
  ``celery beat``'s loop calls it until every task has been sent once, then the
  ``sync()`` that stores their ``last_run_at``; sending replaced by a counter, no broker;
  **idle** = one ``tick()`` with nothing due, median of ``IDLE_SAMPLES`` (50).
- **APScheduler 3** (``bench/peers_children.py apscheduler``): one ``SQLAlchemyJobStore``,
  N interval jobs (60 s) whose ``next_run_time`` is now; **burst** = ``_process_jobs()``
  (the body of ``BlockingScheduler``'s loop) until every job has been submitted once and
  its next run time stored; submission replaced by a counter; **idle** = one
  ``_process_jobs()`` with nothing due, median of ``IDLE_SAMPLES`` (50).

The peers run in their own virtualenv, ``var/bench-peers-venv/``, made from
``bench/requirements-peers.txt`` on first use and again only when that file changes; the
project's ``.venv`` never holds them. Prints a table of the figures and their ratios
(peer ÷ this runtime), a table of the statements, the load average at the start, the
machine at the end (nproc, load average, databases, Python) and the peers' package
versions (issue 12, item 8).

A system that has not finished a round within ``--child-timeout`` seconds is stopped
and shown as ``> T (stopped)``: django-celery-beat's burst grows with the square of its
tasks and outlasts any sitting at 10,000.

    .venv/bin/python bench/peers_bench.py [--loops 100,1000,10000] [--databases sqlite,postgresql]
        [--postgres-url postgres://postgres@127.0.0.1:5432/postgres] [--repeat 3] [--child-timeout 600]
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_env import machine_line, table  # noqa: E402
from ticks_bench import postgres_database  # noqa: E402

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH_DIR = BASE_DIR / "bench"
PEERS_VENV = BASE_DIR / "var" / "bench-peers-venv"
REQUIREMENTS = BENCH_DIR / "requirements-peers.txt"
#: The systems in the order of every round and of the table's columns.
SYSTEMS = {"runtime": "this runtime", "celery-beat": "django-celery-beat", "apscheduler": "APScheduler"}
#: The systems' names in table headers.
COLUMNS = {"runtime": "runtime", "celery-beat": "celery-beat", "apscheduler": "APScheduler"}
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
#: The idle iteration's samples in each child, the same for every system: a scheduler iterates
#: for days, and its first iterations are not its steady state — psycopg prepares a statement
#: on the server only at its sixth execution, and SQLite's statement cache fills likewise.
IDLE_SAMPLES = 50
STDERR_TAIL = 3000


def parse_loops(text: str) -> list[int]:
    """``"100,1000,10000"`` → ``[100, 1000, 10000]``; raises ``argparse.ArgumentTypeError``
    for anything but a comma-separated list of positive integers."""
    try:
        loops = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of loop counts, e.g. 100,1000") from None
    if any(n < 1 for n in loops):
        raise argparse.ArgumentTypeError(f"{text!r}: every loop count must be at least 1")
    return loops


def parse_databases(text: str) -> list[str]:
    """``"sqlite,postgresql"`` → ``["sqlite", "postgresql"]``; raises
    ``argparse.ArgumentTypeError`` for a name not in ``DATABASES``."""
    names = text.split(",")
    unknown = [name for name in names if name not in DATABASES]
    if unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of {', '.join(DATABASES)}")
    return names


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of at least 1")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--loops",
        type=parse_loops,
        default=[100, 1000, 10000],
        help="comma-separated loop counts (default 100,1000,10000)",
    )
    parser.add_argument(
        "--databases",
        type=parse_databases,
        default=["sqlite", "postgresql"],
        help="comma-separated: sqlite, postgresql (default both)",
    )
    parser.add_argument(
        "--postgres-url",
        default="postgres://postgres@127.0.0.1:5432/postgres",
        help="a PostgreSQL server's database to connect to; each child gets a throw-away database beside it",
    )
    parser.add_argument("--repeat", type=positive, default=3, help="rounds per database and loop count (default 3)")
    parser.add_argument(
        "--child-timeout",
        type=positive,
        default=600,
        help="seconds one system gets for one round before it is stopped and shown as '> T' (default 600)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if "postgresql" in args.databases and not args.postgres_url.startswith(("postgres://", "postgresql://")):
        parser.error(f"--postgres-url {args.postgres_url!r}: a postgres:// URL")
    return args


def number(value: float | None) -> str:
    """Three significant figures, grouped: ``0.0213`` → ``0.021``, ``103.4`` → ``103``, ``1234.5`` → ``1,235``;
    ``—`` for no figure (an idle iteration after a burst longer than the interval)."""
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def number_or_dash(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def ratio(peer: float | None, runtime: float | None) -> str:
    """``peer ÷ runtime`` as ``7.4×``: whole above 10, two significant figures below 1; ``—`` when
    either has no figure or runtime is 0."""
    if peer is None or runtime is None or runtime <= 0:
        return "—"
    value = peer / runtime
    if value >= 10:
        return f"{value:,.0f}×"
    if value >= 1:
        return f"{value:.1f}×"
    return f"{value:.2g}×"


def medians(results: list[dict]) -> dict[tuple[str, int, str], dict]:
    """The rounds' results by (database key, loops, system) → median burst s, idle ms and statements;
    an idle figure is ``None`` when a round had none (its burst outlasted the interval)."""
    grouped: dict[tuple[str, int, str], list[dict]] = {}
    for r in results:
        grouped.setdefault((r["databaseKey"], r["loops"], r["system"]), []).append(r)
    return {
        key: {
            **{
                field: None if any(r[field] is None for r in rounds) else statistics.median(r[field] for r in rounds)
                for field in ("burstSeconds", "idleMilliseconds", "burstStatements", "idleStatements")
            },
            "stoppedAfter": max((r.get("stoppedAfter") or 0 for r in rounds), default=0) or None,
        }
        for key, rounds in grouped.items()
    }


def figures_table(results: list[dict], versions: dict[str, str]) -> str:
    """The burst and idle figures (medians) of each system and their ratios to this runtime's."""
    by_key = medians(results)
    peers = [s for s in SYSTEMS if s != "runtime"]
    headers = ["database", "loops"]
    for system in SYSTEMS:
        headers += [f"{COLUMNS[system]} burst s", f"{COLUMNS[system]} idle ms"]
    for system in peers:
        headers += [f"{COLUMNS[system]} ÷ runtime burst", f"{COLUMNS[system]} ÷ runtime idle"]
    rows = []
    for database, loops in sorted({key[:2] for key in by_key}, key=lambda k: (list(DATABASES).index(k[0]), k[1])):
        figures = {system: by_key[(database, loops, system)] for system in SYSTEMS}
        row = [versions.get(database, DATABASES[database]), f"{loops:,}"]
        for system in SYSTEMS:
            stopped = figures[system]["stoppedAfter"]
            burst = f"> {stopped:,} (stopped)" if stopped else number(figures[system]["burstSeconds"])
            row += [burst, number(figures[system]["idleMilliseconds"])]
        for system in peers:
            stopped = figures[system]["stoppedAfter"]
            burst = (f"> {ratio(stopped, figures['runtime']['burstSeconds'])}" if stopped
                     else ratio(figures[system]["burstSeconds"], figures["runtime"]["burstSeconds"]))
            row += [
                burst,
                ratio(figures[system]["idleMilliseconds"], figures["runtime"]["idleMilliseconds"]),
            ]
        rows.append(row)
    return table(headers, rows)


def statements_table(results: list[dict], versions: dict[str, str]) -> str:
    """Statements per due loop in the burst and per idle iteration, each system (medians)."""
    by_key = medians(results)
    headers = ["database", "loops"]
    for system in SYSTEMS:
        headers += [f"{COLUMNS[system]} burst stmts/loop", f"{COLUMNS[system]} idle stmts"]
    rows = []
    for database, loops in sorted({key[:2] for key in by_key}, key=lambda k: (list(DATABASES).index(k[0]), k[1])):
        row = [versions.get(database, DATABASES[database]), f"{loops:,}"]
        for system in SYSTEMS:
            figures = by_key[(database, loops, system)]
            burst = figures["burstStatements"]
            row += ["—" if burst is None else f"{burst / loops:.2f}", number_or_dash(figures["idleStatements"])]
        rows.append(row)
    return table(headers, rows)


def peers_python() -> Path:
    """The peers' interpreter, its virtualenv made or brought up to ``REQUIREMENTS`` first."""
    python = PEERS_VENV / "bin" / "python"
    stamp = PEERS_VENV / f".installed-{hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]}"
    if stamp.exists():
        return python
    print(f"making the peers' virtualenv in {PEERS_VENV.relative_to(BASE_DIR)}", file=sys.stderr, flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"installing {REQUIREMENTS.relative_to(BASE_DIR)} failed:\n{done.stderr[-STDERR_TAIL:]}")
    for old in PEERS_VENV.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return python


def run_child(system: str, database: str, loops: int, args: argparse.Namespace, python: Path) -> dict:
    """One system at one N on a fresh database; the child's JSON figures. Exits naming the
    system, database and N, with the child's stderr tail, when the child fails."""
    root = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    name = f"factory_peers_bench_{os.getpid()}"
    try:
        if database == "postgresql":
            url = postgres_database(args.postgres_url, name, create=True)
        else:
            url = "" if system == "runtime" else f"sqlite:///{root / 'peers.sqlite3'}"
        if system == "runtime":
            argv = [
                sys.executable,
                str(BENCH_DIR / "ticks_bench.py"),
                "--child",
                str(loops),
                "--database-url",
                url,
                "--repeat",
                str(IDLE_SAMPLES),
            ]
        else:
            argv = [str(python), str(BENCH_DIR / "peers_children.py"), system, str(loops), url]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd=root, timeout=args.child_timeout)
        except subprocess.TimeoutExpired:
            return {
                "system": system, "databaseKey": database, "loops": loops, "stoppedAfter": args.child_timeout,
                "burstSeconds": None, "idleMilliseconds": None, "burstStatements": None, "idleStatements": None,
            }
        if done.returncode != 0:
            raise SystemExit(
                f"{SYSTEMS[system]} on {DATABASES[database]}, {loops:,} loops: the child failed "
                f"(exit {done.returncode}); its stderr ends:\n{done.stderr[-STDERR_TAIL:]}"
            )
        return {**json.loads(done.stdout.strip().splitlines()[-1]), "system": system, "databaseKey": database}
    finally:
        if database == "postgresql":
            postgres_database(args.postgres_url, name, create=False)
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    python = peers_python()
    load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results, versions, packages = [], {}, {}
    for database in args.databases:
        for loops in args.loops:
            for round_ in range(1, args.repeat + 1):
                for system in SYSTEMS:
                    r = run_child(system, database, loops, args, python)
                    results.append(r)
                    if "database" in r:
                        versions[database] = r["database"]
                    packages.update(r.get("versions", {}))
                    if r.get("stoppedAfter"):
                        print(f"  {SYSTEMS[system]}, {DATABASES[database]}, {loops:,} loops, round {round_}: "
                              f"stopped after {r['stoppedAfter']:,} s", file=sys.stderr, flush=True)
                        continue
                    sent = ""
                    if "sentSeconds" in r:
                        sent = f" (every task sent after {number(r['sentSeconds'])} s, {r['sends']:,} sends)"
                    print(
                        f"  {SYSTEMS[system]}, {r['database']}, {loops:,} loops, round {round_}: "
                        f"burst {number(r['burstSeconds'])} s{sent}, idle {number(r['idleMilliseconds'])} ms",
                        file=sys.stderr,
                        flush=True,
                    )
    print(figures_table(results, versions))
    print()
    print(statements_table(results, versions))
    print()
    print(f"load average at the start: {load_at_start}")
    print(machine_line(", ".join(versions.get(d, DATABASES[d]) for d in args.databases)))
    print("peers: " + ", ".join(f"{name} {version}" for name, version in packages.items()))


if __name__ == "__main__":
    main()
