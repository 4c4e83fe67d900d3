"""``manage.py backup`` while the runtime writes, and the restore (docs/production.md, "Backups and restore")."""

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import PROJECT_DIR

pytestmark = [pytest.mark.process, pytest.mark.django_db]

#: A writer busier than a runtime: one journal entry per transaction, as fast as it can, until
#: the file named by its argument exists (at most 60 s and 200,000 entries).
WRITER = """
import django, os, sys, time
from pathlib import Path
django.setup()
from django.db import transaction
from django.utils import timezone
from runtime.services.journal import record
stop, deadline = Path(sys.argv[1]), time.monotonic() + 60
for n in range(200_000):
    with transaction.atomic():
        record("backup_probe", "system", at=timezone.now(), data={"n": n})
    if n == 100:
        print("writing", flush=True)
    if stop.exists() or time.monotonic() > deadline:
        break
print(n + 1, flush=True)
"""

sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backup API (PostgreSQL: pg_dump)")


def journal(runtime, database_url: str) -> list[dict]:
    done = runtime.manage("journal", "--json", "--limit", "100000", DATABASE_URL=database_url)
    return json.loads(done.stdout)


@sqlite_only
def test_a_backup_taken_while_the_runtime_writes_restores_to_a_consistent_database(runtime, tmp_path):
    stop = tmp_path / "stop"
    out = tmp_path / "backup.sqlite3"
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(stop)], cwd=PROJECT_DIR,
        env={**runtime.env, "DJANGO_SETTINGS_MODULE": "factory_site.settings"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as writer:
        assert writer.stdout.readline() == "writing\n"
        backed = runtime.manage("backup", "--out", str(out))
        stop.touch()
        written, errors = writer.communicate(timeout=120)
    assert writer.returncode == 0, errors
    assert backed.stdout == f"backup: sqlite database copied to {out} ({out.stat().st_size} bytes)\n"
    assert not (tmp_path / ".backup.sqlite3.partial").exists()

    with sqlite3.connect(out) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)

    # The restore (docs/production.md): the runtime stopped, the copy put in place of the file.
    restored = tmp_path / "restored" / "factory.sqlite3"
    restored.parent.mkdir()
    shutil.copyfile(out, restored)
    url = f"sqlite:///{restored}"
    assert runtime.manage("migrate", "--check", DATABASE_URL=url).returncode == 0
    live = journal(runtime, runtime.env["DATABASE_URL"])
    copied = journal(runtime, url)
    probes = [entry["data"]["n"] for entry in copied if entry["action"] == "backup_probe"]
    assert 100 < len(probes) < int(written), "nothing was written while the backup ran"
    # The copy is the database at one instant: a prefix of what was written, none missing, none torn.
    assert sorted(probes) == list(range(len(probes)))
    assert copied == live[len(live) - len(copied):]


@sqlite_only
@pytest.mark.parametrize("suffix", ["", "-wal", "-writers.lock"])
def test_a_backup_onto_the_live_database_or_its_companions_is_refused_and_leaves_it_whole(runtime, tmp_path, suffix):
    database = runtime.env["DATABASE_URL"].removeprefix("sqlite:///")
    runtime.manage("journal", "--limit", "1")  # the database exists, in WAL mode
    before = Path(database).read_bytes()
    done = runtime.manage("backup", "--out", database + suffix, check=False)
    what = f"the live database's {suffix} file" if suffix else "the live database"
    assert (done.returncode, done.stderr.strip()) == (
        1, f"CommandError: backup: {database + suffix} is {what}: write the backup to another file",
    )
    assert Path(database).read_bytes() == before
    assert not list(Path(database).parent.glob(".*.partial"))


def test_a_backup_into_a_directory_is_refused(runtime, tmp_path):
    done = runtime.manage("backup", "--out", str(tmp_path), check=False)
    assert (done.returncode, done.stderr.strip()) == (
        1, f"CommandError: --out {tmp_path} is a directory: name the backup file to write in it",
    )
    assert not list(tmp_path.parent.glob(f".{tmp_path.name}.partial"))


@sqlite_only
def test_a_backup_of_a_missing_database_is_refused(runtime, tmp_path):
    done = runtime.manage("backup", "--out", str(tmp_path / "b.sqlite3"), check=False,
                          DATABASE_URL=f"sqlite:///{tmp_path / 'none.sqlite3'}")
    assert (done.returncode, done.stderr.strip()) == (
        1, f"CommandError: backup: the database file {tmp_path / 'none.sqlite3'} does not exist",
    )


def test_a_backup_into_a_missing_directory_is_refused(runtime, tmp_path):
    done = runtime.manage("backup", "--out", str(tmp_path / "nowhere" / "b"), check=False)
    assert (done.returncode, done.stderr.strip()) == (1, f"CommandError: the directory {tmp_path / 'nowhere'} does not exist")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_dump backs up PostgreSQL only")
def test_postgresql_is_backed_up_by_pg_dump_or_refused_without_it(runtime, tmp_path):
    out = tmp_path / "factory.dump"
    if shutil.which("pg_dump"):
        done = runtime.manage("backup", "--out", str(out))
        assert done.stdout == f"backup: postgresql database copied to {out} ({out.stat().st_size} bytes)\n"
        listing = subprocess.run(["pg_restore", "--list", str(out)], capture_output=True, text=True, check=True)
        assert "TABLE DATA public runtime_journalentry" in listing.stdout
    done = runtime.manage("backup", "--out", str(out), check=False, PATH="/nonexistent")
    assert done.returncode == 1
    assert done.stderr.strip().startswith("CommandError: backup: pg_dump is not on the PATH: install the PostgreSQL client")
