"""Benchmark: loading a registry whose overlay declares N loops — cold, and again unchanged.

Not a test. Writes a copy of the kernel registry and a ``config/schedule.yaml`` of
``--loops`` new watched loops (a different cadence and payload every few loops, so their
shapes vary as an operator's would), then, in a new process per figure:

- ``cold``: the first ``get_registry()`` of a process (parse, merge, validate, digest),
  wall and CPU seconds (on a shared machine the CPU figure is the one that holds);
- ``unchanged``: ``get_registry()`` again in that process after the files' change check
  is due — the files on disk are the same, so nothing is read or validated again;
- ``rss MB``: the process's resident memory with that registry loaded.

    .venv/bin/python bench/registry_bench.py [--loops 10000 100000]
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402

CADENCES = ("1m", "5m", "15m", "60m", "1d")


def write_overlay(config_dir: Path, loops: int) -> None:
    lines = ["schedules:"]
    for i in range(loops):
        lines += [
            f"  o-{i:06d}:",
            "    eventType: clock.tick.reaper",
            f"    every: {CADENCES[i % len(CADENCES)]}",
            "    catchUp: none",
            "    singleton: true",
            f"    enabled: {'true' if i % 2 else 'false'}",
        ]
    (config_dir / "schedule.yaml").write_text("\n".join(lines) + "\n")


def one(loops: int) -> dict:
    root = bench_env.make_root("registry-bench-")
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=0, auto=1)
    write_overlay(config_dir, loops)
    bench_env.setup_django({"DATABASE_URL": f"sqlite:///{root / 'bench.sqlite3'}",
                            "FACTORY_REGISTRY_DIR": str(registry_dir), "FACTORY_CONFIG_DIR": str(config_dir)})
    from runtime.registry import get_registry, store

    start, cpu_start = time.perf_counter(), time.process_time()
    registry = get_registry()
    cold, cold_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert len(registry.loops) == loops + 1, len(registry.loops)
    time.sleep(1.1)  # past the once-a-second change check
    start = time.perf_counter()
    again = get_registry()
    unchanged = time.perf_counter() - start
    assert again is registry
    # The same bytes under a new mtime: the content digest says nothing changed.
    (config_dir / "schedule.yaml").touch()
    time.sleep(1.1)
    start = time.perf_counter()
    touched = get_registry()
    touched_s = time.perf_counter() - start
    assert touched is registry and not store.problems()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"loops": loops, "cold": cold, "coldCpu": cold_cpu, "unchanged": unchanged, "touched": touched_s, "rss": rss,
            "database": bench_env.database_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    rows, database = [], ""
    for loops in args.loops:
        out = subprocess.run([sys.executable, __file__, "--one", str(loops)], check=True,
                             capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        database = row["database"]
        rows.append([row["loops"], f"{row['cold']:.2f}", f"{row['coldCpu']:.2f}", f"{row['unchanged'] * 1000:.2f}",
                     f"{row['touched'] * 1000:.1f}", f"{row['rss']:.0f}"])
    print(bench_env.table(["overlay loops", "cold s", "cold CPU s", "unchanged ms", "touched, same bytes ms", "peak rss MB"], rows))
    print(bench_env.machine_line(database))


if __name__ == "__main__":
    main()
