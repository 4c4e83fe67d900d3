"""What the planning-side benchmarks share: a throw-away registry and database, Django set up
on them, and the machine line every table ends with (nproc, load average, database and version).

Not a test. ``prepare`` makes the database: a temporary SQLite file, or — for a
``postgres://…/NAME`` URL — the database NAME dropped and created again (never point it at
a database you want to keep).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
#: ``FACTORY_LOG_LEVEL`` of the measured processes: the runtime's default, so every figure
#: includes the log lines an operator's runtime writes (into a file the bench keeps).
LOG_LEVEL = "INFO"


def make_root(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def build_kernel_loops(root: Path, *, watched: int, auto: int, enabled: bool = True) -> tuple[Path, Path]:
    """A copy of the kernel registry whose ``schedules.json`` holds ``watched`` enabled copies
    of ``reaper`` (``w-00000``…) and ``auto`` copies of ``heartbeat`` (``a-00000``…), every
    one due now (a fresh loop fires its current slot) — or, ``enabled=False``, the watched
    copies disabled."""
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    reaper, heartbeat = {**schedules["reaper"], "enabled": enabled}, schedules["heartbeat"]
    loops = {f"w-{i:05d}": reaper for i in range(watched)}
    loops.update({f"a-{i:05d}": heartbeat for i in range(auto)})
    (registry_dir / "schedules.json").write_text(json.dumps(loops))
    return registry_dir, config_dir


def prepare_database(database_url: str | None, root: Path) -> str:
    """The URL of an empty database: ``database_url`` recreated, or a SQLite file under ``root``."""
    if not database_url:
        return f"sqlite:///{root / 'bench.sqlite3'}"
    if not database_url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("--database-url must be a postgres:// URL (SQLite is the default)")
    import psycopg

    base, name = database_url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    return database_url


def drop_database(database_url: str | None) -> None:
    """Drop the PostgreSQL database ``database_url`` names once a bench is done with it (a
    SQLite file goes with its temporary directory); nothing for None. A bench that fails
    leaves its database for a look."""
    if not database_url:
        return
    import psycopg

    base, name = database_url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(env: dict[str, str]) -> None:
    """Point this process's settings at ``env`` (DATABASE_URL, FACTORY_*), set Django up, migrate."""
    os.environ.update({"FACTORY_LOG_LEVEL": LOG_LEVEL, "DJANGO_SETTINGS_MODULE": "factory_site.settings", **env})
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def database_version() -> str:
    """``PostgreSQL 16.x`` or ``SQLite 3.x`` of the connection in use."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0]}"
        cursor.execute("SELECT sqlite_version()")
        return f"SQLite {cursor.fetchone()[0]}"


def machine_line(database: str) -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"machine: nproc {os.cpu_count()}, load average {load}, database {database}, Python {sys.version.split()[0]}"


def run_child(argv: list[str], *, timeout: float, what: str) -> dict:
    """Run a bench's child process (``argv``) and return the JSON object its last line of
    output prints; SystemExit naming ``what``, with the end of its stderr, when it fails."""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{what}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table, as docs/performance.md keeps them."""
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)
