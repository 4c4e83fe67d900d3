"""Benchmark: signed ``POST /events`` under ``runserve`` — admissions/s and p50/p99, with and without duplicates.

Not a test. Starts ``runserve`` (its HTTP threads, ``--http-workers`` workers, the slot loop on,
so it plans what arrives; no run workers) on a throw-away SQLite database — and on the
throw-away PostgreSQL database ``--database-url`` names, dropped and created again —
then, for each client count and duplicate fraction, runs ``bench/intake_load.py`` as a
separate process on loopback (pre-signed bodies; it reports its own CPU) and prints one
table row per run.

    .venv/bin/python bench/intake_bench.py [--clients 8 32] [--requests 4000] [--duplicates 0 0.5]
        [--database-url postgres://postgres@127.0.0.1:5432/bench_intake] [--no-sqlite] [--conn-max-age 0]
        [--http-workers 2]
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_env  # noqa: E402

MANAGE = str(bench_env.BASE_DIR / "manage.py")
SECRET = "bench-events-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"runserve exited with {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("runserve did not answer in time")


def database_version(env: dict) -> str:
    code = ("import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'factory_site.settings'); "
            "django.setup(); import sys; sys.path.insert(0, 'bench'); import bench_env; "
            "print(bench_env.database_version())")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=bench_env.BASE_DIR, check=True,
                          capture_output=True, text=True).stdout.strip()


def serve_and_load(database_url: str | None, args) -> list[list]:
    root = bench_env.make_root("intake-bench-")
    registry_dir, config_dir = bench_env.build_kernel_loops(root, watched=0, auto=1)
    url = bench_env.prepare_database(database_url, root)
    if args.conn_max_age is not None:
        # Persistent connections (django-environ reads these from the URL's query).
        url += f"?conn_max_age={args.conn_max_age}" + ("&conn_health_checks=true" if database_url else "")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": url, "DJANGO_SECRET_KEY": "intake-bench-secret-key",
        "FACTORY_REGISTRY_DIR": str(registry_dir), "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_RUNS_DIR": str(root / "runs"), "FACTORY_EVENTS_SECRET": SECRET,
        "FACTORY_OPERATOR_PASSWORD": "bench-operator-pass", "FACTORY_LOG_LEVEL": "WARNING",
    }
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v", "0"], env=env, check=True,
                   cwd=bench_env.BASE_DIR)
    version = database_version(env)
    port = free_port()
    log = open(root / "runserve.log", "w")  # noqa: SIM115 - held for the server's lifetime
    server = subprocess.Popen([sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}", "--run-workers", "0",
                               "--http-workers", str(args.http_workers)],
                              env=env, cwd=bench_env.BASE_DIR, stdout=log, stderr=subprocess.STDOUT)
    rows = []
    try:
        wait_listening(port, server)
        for clients in args.clients:
            for duplicates in args.duplicates:
                out = subprocess.run(
                    [sys.executable, str(Path(__file__).parent / "intake_load.py"), "--url", f"http://127.0.0.1:{port}",
                     "--secret", SECRET, "--clients", str(clients), "--requests", str(args.requests),
                     "--duplicates", str(duplicates)],
                    check=True, capture_output=True, text=True, timeout=600,
                ).stdout
                r = json.loads(out.strip().splitlines()[-1])
                rows.append([version, args.http_workers, clients, f"{duplicates:.0%}", r["requests"], f"{r['perSecond']:.0f}",
                             f"{r['admittedPerSecond']:.0f}", f"{r['p50']:.1f}", f"{r['p99']:.1f}",
                             f"{r['generatorCpu']:.1f} / {r['seconds']:.1f}",
                             " ".join(f"{k}:{v}" for k, v in sorted(r["statuses"].items()))])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--duplicates", type=float, nargs="+", default=[0.0, 0.5])
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped and recreated)")
    parser.add_argument("--conn-max-age", type=int, help="the served database connections' age in seconds (default: FACTORY_DB_CONN_MAX_AGE, 60; 0 opens one per request)")
    parser.add_argument("--http-workers", type=int, default=2, help="runserve's --http-workers (default 2, runserve's own)")
    parser.add_argument("--no-sqlite", action="store_true", help="only the --database-url database")
    args = parser.parse_args()
    rows = []
    for database_url in ([] if args.no_sqlite else [None]) + ([args.database_url] if args.database_url else []):
        rows += serve_and_load(database_url, args)
    print(bench_env.table(
        ["database", "HTTP workers", "clients", "duplicates", "requests", "answers/s", "admitted/s", "p50 ms", "p99 ms",
         "generator CPU s / wall s", "statuses"], rows))
    print(bench_env.machine_line(", ".join(sorted({row[0] for row in rows}))))


if __name__ == "__main__":
    main()
