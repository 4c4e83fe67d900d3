"""Benchmark: ``runserve`` restarted with N loops — time to its first slot-loop iteration, and each process's memory.

Not a test. For each ``--loops`` count: a registry of N enabled watched loops (copies of
``reaper``) and a throw-away SQLite database; ``runserve`` is started once and left to
fire and plan every loop's first slot, then stopped, then started again — the restart
measured:

- ``spawn → first iteration``: from starting ``runserve`` to the slot loop's first
  iteration recorded (its ``SlotLoopStatus`` row), polled every 20 ms;
- ``slot loop start → first iteration``: the same, from the slot-loop process's own start;
- the CPU seconds the slot-loop process had used by then (the figure a shared machine
  does not blur), and the resident memory and CPU seconds of each process of the runtime.

    .venv/bin/python bench/startup_bench.py [--loops 10000 100000] [--disabled]
"""

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402

MANAGE = str(bench_env.BASE_DIR / "manage.py")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise SystemExit("no btime in /proc/stat")


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    result, todo = [], [root]
    while todo:
        pid = todo.pop()
        result.append(pid)
        todo += children.get(pid, [])
    return result


def describe(pid: int) -> tuple[str, float, float, float]:
    """(role, resident MB, start as a unix instant, CPU seconds so far) of process ``pid``."""
    argv = (Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"))
    text = " ".join(a.decode() for a in argv if a)
    role = ("slot loop" if "slot_loop" in text else "run worker" if b"worker" in argv
            else "gunicorn" if "gunicorn" in text else "runserve" if "runserve" in text else text[:40])
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    start = boot_time() + int(fields[19]) / CLOCK_TICKS
    return role, rss, start, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def last_iteration(db: Path) -> datetime | None:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            row = conn.execute("SELECT last_iteration_at FROM schedules_slotloopstatus").fetchone()
    except sqlite3.OperationalError:
        return None
    return datetime.fromisoformat(row[0]).replace(tzinfo=UTC) if row else None


def start(env: dict, port: int, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}"], env=env,
                            cwd=bench_env.BASE_DIR, stdout=log, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def unplanned(db: Path) -> int:
    with sqlite3.connect(db, timeout=5) as conn:
        return conn.execute("SELECT count(*) FROM runtime_event WHERE planned_at IS NULL").fetchone()[0]


def wait_iteration(db: Path, after: float, process: subprocess.Popen, timeout: float, *, drained=False) -> float:
    """Wait for an iteration recorded after ``after`` (and, ``drained``, nothing left to plan)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"runserve exited with {process.returncode}")
        seen = last_iteration(db)
        if seen is not None and seen.timestamp() > after and not (drained and unplanned(db)):
            return time.time()
        time.sleep(0.02)
    raise SystemExit(f"no slot-loop iteration within {timeout} s")


def one(loops: int, port: int, enabled: bool) -> tuple[list, list]:
    root = bench_env.make_root("startup-bench-")
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=loops, auto=0, enabled=enabled)
    db = root / "bench.sqlite3"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SECRET_KEY": "startup-bench-secret-key",
        "FACTORY_REGISTRY_DIR": str(registry_dir), "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_RUNS_DIR": str(root / "runs"), "FACTORY_OPERATOR_PASSWORD": "bench-operator-pass",
        "FACTORY_LOG_LEVEL": bench_env.LOG_LEVEL,
    }
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v", "0"], env=env, check=True,
                   cwd=bench_env.BASE_DIR)
    with open(root / "runserve.log", "w") as log:
        first = start(env, port, log)
        # The first start fires (and plans) every loop's first slot; the restart below has nothing due.
        wait_iteration(db, 0, first, timeout=1800, drained=True)
        stop(first)
        spawned = time.time()
        again = start(env, port, log)
        done = wait_iteration(db, spawned, again, timeout=300)
        processes = [describe(pid) for pid in process_tree(again.pid)]
        stop(again)
    slot_start, slot_cpu = next((s, c) for role, _, s, c in processes if role == "slot loop")
    row = [loops, "enabled" if enabled else "disabled", f"{done - spawned:.2f}", f"{done - slot_start:.2f}", f"{slot_cpu:.2f}"]
    memory = [[loops, "enabled" if enabled else "disabled", role, f"{rss:.0f}", f"{cpu:.2f}"] for role, rss, _, cpu in sorted(processes, key=lambda p: p[2])]
    return row, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--port", type=int, default=7591)
    parser.add_argument("--disabled", action="store_true",
                        help="the loops disabled: the registry's size without the first start firing every loop")
    args = parser.parse_args()
    rows, memory = [], []
    for loops in args.loops:
        row, used = one(loops, args.port, not args.disabled)
        rows.append(row)
        memory += used
    print(bench_env.table(["loops", "loops are", "spawn → first iteration s", "slot loop start → first iteration s",
                           "slot loop CPU s by then"], rows))
    print(bench_env.table(["loops", "loops are", "process", "resident MB", "CPU s by then"], memory))
    print(bench_env.machine_line(f"SQLite {sqlite3.sqlite_version}"))


if __name__ == "__main__":
    main()
