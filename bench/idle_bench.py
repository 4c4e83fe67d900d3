"""Benchmark: what an idle second costs — CPU of every ``runserve`` process while nothing is due.

Not a test. For each ``--loops`` count N: a copy of the kernel registry without its own
loops and a ``config/schedule.yaml`` overlay of N enabled loops every hour (watched
``clock.tick.reaper`` ticks, so each first slot is planned into a pending proposal and
nothing runs; previews only when a person asks, ``FACTORY_PREVIEW_QUEUE=0``), a fresh
database (a temporary SQLite file, or the throw-away PostgreSQL database ``--database-url``
names, dropped and created again and dropped after). A real ``runserve`` (its defaults:
two HTTP workers, one run worker) starts and fires every loop's first slot; once every
tick is planned, and ``--settle`` seconds more, the bench reads each process's CPU time
(``utime + stime`` of ``/proc/<pid>/stat``, with ``cutime + cstime``: children it reaped)
over the process tree of ``runserve``, waits ``--seconds``, reads it again, and prints
the CPU milliseconds each process role used per second, and in total. A window that would
hold the top of an hour (the loops' next slot) is moved past it. ``utime`` and ``stime``
are counted in clock ticks of 10 ms, charged to whichever thread runs when the tick comes:
over 60 s a role's figure is known to about 0.17 ms per second. The column beside it sums
the scheduler's own nanoseconds of each process's live threads (``schedstat``), exact, but
blind to a thread that ended in the window.

On PostgreSQL it also prints the transactions committed per second in the bench's
database (``pg_stat_database``) over the window: the idle runtime's statements' budget.

    .venv/bin/python bench/idle_bench.py [--loops 100,10000,100000] [--seconds 60]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_idle]
"""

import argparse
import os
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402
import serve_env  # noqa: E402

# runserve's pre-exec hook imports the project's lib.processes.
sys.path.insert(0, str(bench_env.BASE_DIR))

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: The order of the roles in the table.
ROLES = ("supervisor", "slot loop", "gunicorn master", "HTTP worker", "run worker", "other")


def parse_loops(text: str) -> list[int]:
    """``"100,10000,1e5"`` → ``[100, 10000, 100000]``. Pure."""
    counts = [int(float(part)) for part in text.replace("_", "").split(",") if part.strip()]
    if not counts or any(count < 1 for count in counts):
        raise ValueError(f"--loops needs positive counts: {text!r}")
    return counts


def overlay_yaml(loops: int) -> str:
    """A ``schedule.yaml`` overlay of ``loops`` enabled hourly watched loops ``idle-000000``…. Pure."""
    lines = ["schedules:"]
    for i in range(loops):
        lines += [
            f"  idle-{i:06d}:",
            "    eventType: clock.tick.reaper",
            "    every: 60m",
            "    catchUp: none",
            "    singleton: true",
            "    enabled: true",
        ]
    return "\n".join(lines) + "\n"


def parse_stat(text: str) -> tuple[int, int]:
    """``(ppid, clock ticks of CPU)`` from a ``/proc/<pid>/stat`` line: utime + stime + cutime +
    cstime (the command's name, in parentheses, may hold spaces). Pure."""
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is the state (stat field 3): ppid is field 4, utime..cstime fields 14..17.
    return int(fields[1]), sum(int(value) for value in fields[11:15])


def role_of(argv: list[str], parent_argv: list[str] | None) -> str:
    """The role of a runtime process from its command line (and its parent's). Pure. A process
    may have rewritten its command line into one string (``setproctitle``): words are compared."""
    words = " ".join(argv).split()
    if any("gunicorn" in word for word in words):
        # gunicorn's workers are forks of its master: the same command line.
        return "HTTP worker" if parent_argv is not None and "gunicorn" in " ".join(parent_argv) else "gunicorn master"
    if "slot_loop" in words:
        return "slot loop"
    if "worker" in words:
        return "run worker"
    if "runserve" in words:
        return "supervisor"
    return "other"


@dataclass(frozen=True)
class Sample:
    """One reading of a process tree: per pid, its role, CPU clock ticks (``/proc/<pid>/stat``)
    and CPU nanoseconds of its live threads (``/proc/<pid>/task/*/schedstat``)."""

    at: float
    processes: dict[int, tuple[str, int, int]]


def cpu_per_second(before: Sample, after: Sample) -> dict[str, tuple[int, float, float]]:
    """Per role: ``(processes, CPU ms per second from clock ticks, the same from schedstat)``
    between two samples. A process in only one of them counts from 0 (started) or not at all
    (gone: its parent's cutime has it). Pure."""
    seconds = after.at - before.at
    result: dict[str, list] = {}
    for pid in before.processes.keys() | after.processes.keys():
        role = (after.processes.get(pid) or before.processes[pid])[0]
        entry = result.setdefault(role, [0, 0.0, 0.0])
        if pid not in after.processes:
            continue
        _, ticks, nanoseconds = after.processes[pid]
        _, ticks_before, nanoseconds_before = before.processes.get(pid, (role, 0, 0))
        entry[0] += 1
        entry[1] += (ticks - ticks_before) / CLOCK_TICKS * 1000 / seconds
        entry[2] += (nanoseconds - nanoseconds_before) / 1e6 / seconds
    return {role: (count, ticks, precise) for role, (count, ticks, precise) in result.items()}


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    ppid = parse_stat(stat.read())[0]
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def _argv(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return [part.decode(errors="replace") for part in cmdline.read().split(b"\0") if part]


def _thread_nanoseconds(pid: int) -> int:
    total = 0
    for task in os.scandir(f"/proc/{pid}/task"):
        try:
            with open(f"{task.path}/schedstat") as schedstat:
                total += int(schedstat.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total


def sample(root: int) -> Sample:
    """The CPU ticks of ``root`` and every descendant, now."""
    children, processes, todo = _children(), {}, [(root, None)]
    while todo:
        pid, parent_argv = todo.pop()
        try:
            argv = _argv(pid)
            with open(f"/proc/{pid}/stat") as stat:
                ticks = parse_stat(stat.read())[1]
        except (OSError, IndexError, ValueError):
            continue
        processes[pid] = (role_of(argv, parent_argv), ticks, _thread_nanoseconds(pid))
        todo += [(child, argv) for child in children.get(pid, [])]
    return Sample(time.monotonic(), processes)


def _query(database_url: str, sql: str):
    """The first row of ``sql`` on the bench's database, through a connection of its own."""
    if database_url.startswith("sqlite:///"):
        import sqlite3

        with closing(sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=30)) as conn:
            return conn.execute(sql).fetchone()
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(sql).fetchone()


def _version(database_url: str) -> str:
    if database_url.startswith("sqlite:///"):
        return f"SQLite {_query(database_url, 'SELECT sqlite_version()')[0]}"
    return f"PostgreSQL {_query(database_url, 'SHOW server_version')[0]}"


def _pg_transactions(database_url: str) -> int:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [name]).fetchone()
    return row[0]


def one(loops: int, args) -> dict:
    root = bench_env.make_root("idle-bench-")
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=0, auto=0)
    (config_dir / "schedule.yaml").write_text(overlay_yaml(loops))
    url = bench_env.prepare_database(args.database_url, root)
    env = {**serve_env.runtime_env(root, url, registry_dir, config_dir), "FACTORY_PREVIEW_QUEUE": "0"}
    subprocess.run([sys.executable, serve_env.MANAGE, "migrate", "--no-input", "-v", "0"], env=env, check=True,
                   cwd=bench_env.BASE_DIR)
    version = _version(url)
    port = serve_env.free_port()
    with open(root / "runserve.log", "w") as log:
        server = serve_env.start_runserve(env, port=port, log=log, run_workers=args.run_workers,
                                          http_workers=args.http_workers)
        try:
            started = time.monotonic()

            def drained() -> bool:
                planned, waiting = _query(url, "SELECT COUNT(planned_at), COUNT(*) - COUNT(planned_at) FROM runtime_event")
                return planned >= loops and not waiting

            serve_env.wait_until(drained, timeout=args.timeout, what=f"{loops} first ticks planned",
                                 processes=[server], every=1.0)
            ready = time.monotonic() - started
            time.sleep(args.settle)
            # Keep the top of the hour (the next slot of every loop) out of the window.
            into_hour = time.time() % 3600
            if 3600 - into_hour < args.seconds + 5:
                time.sleep(3600 - into_hour + 1)
                serve_env.wait_until(drained, timeout=args.timeout, what="the hour's ticks planned",
                                     processes=[server], every=1.0)
                time.sleep(args.settle)
            transactions = _pg_transactions(url) if args.database_url else None
            load = os.getloadavg()[0]
            before = sample(server.pid)
            time.sleep(args.seconds)
            after = sample(server.pid)
            if args.database_url:
                transactions = (_pg_transactions(url) - transactions) / (after.at - before.at)
            if server.poll() is not None:
                raise SystemExit(f"runserve exited with {server.returncode} during the window")
        finally:
            serve_env.stop_all([server])
    if args.database_url:
        bench_env.drop_database(args.database_url)
    return {"loops": loops, "ready": ready, "roles": cpu_per_second(before, after), "load": load,
            "transactions": transactions, "version": version, "seconds": after.at - before.at}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=parse_loops, default=[100, 10_000, 100_000], help="comma-separated counts")
    parser.add_argument("--seconds", type=float, default=60.0, help="the window sampled, in seconds (default 60)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds waited after the first slot is planned")
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped and created); SQLite if none")
    parser.add_argument("--http-workers", type=int, default=2, help="as runserve's (default 2)")
    parser.add_argument("--run-workers", type=int, default=1, help="as runserve's (default 1)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the first slot planned")
    args = parser.parse_args()
    rows, version = [], None
    for loops in args.loops:
        result = one(loops, args)
        version = result["version"]
        roles = result["roles"]
        for role in sorted(roles, key=lambda r: ROLES.index(r) if r in ROLES else len(ROLES)):
            count, ms, precise = roles[role]
            rows.append([loops, role, count, f"{ms:.2f}", f"{precise:.2f}", "", ""])
        total, precise = (sum(values[i] for values in roles.values()) for i in (1, 2))
        rows.append([loops, "**whole runtime**", sum(values[0] for values in roles.values()), f"**{total:.2f}**",
                     f"**{precise:.2f}**",
                     "" if result["transactions"] is None else f"{result['transactions']:.2f}",
                     f"{result['load']:.2f}"])
        print(f"{loops} loops: first slot planned {result['ready']:.1f} s after spawn; window {result['seconds']:.1f} s",
              file=sys.stderr, flush=True)
    print(bench_env.table(["loops", "process", "processes", "CPU ms per idle s", "… by schedstat", "transactions/s", "load (1 min)"], rows))
    print(bench_env.machine_line(version))


if __name__ == "__main__":
    main()
