"""A consistent copy of the database while the runtime runs (docs/production.md, "Backups and restore").

- **SQLite**: SQLite's online backup API (``sqlite3.Connection.backup``) copies the whole
  database in one step, inside one read transaction: under WAL the slot loop, the HTTP
  workers and the run workers go on writing meanwhile, and the copy is the database as of
  that transaction's start — never a half-written page, which copying the file (and its
  ``-wal`` beside it) can give. The copy is written beside the target, checked with
  ``PRAGMA integrity_check``, switched out of WAL (one self-contained file) and only then
  renamed onto the target.
- **PostgreSQL**: ``pg_dump --format=custom`` (one consistent snapshot too), restored with
  ``pg_restore``. Refused with ``BackupRefused`` when ``pg_dump`` is not on the PATH.

What the database does not hold — ``FACTORY_CONFIG_DIR`` (the overlay, repos.yaml), the
secret key and the runs directory — is files: docs/production.md copies them beside it.
"""

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

#: The database file and those SQLite (and ``runtime.sqlite_backend``'s write turn) keep beside it.
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal", "-writers.lock")


class BackupRefused(Exception):
    """The backup cannot be made; the message says why and what to do."""


def backup_sqlite(database: str, out: Path) -> int:
    """Copy the SQLite database file ``database`` to ``out``; returns the copy's size in bytes.

    Raises BackupRefused when the database file does not exist, when ``out`` is the
    database or one of the files beside it that it works with (replacing one under the
    running runtime corrupts the database), or when the copy fails its check."""
    if not Path(database).is_file():
        raise BackupRefused(f"the database file {database} does not exist")
    live, target = Path(database).resolve(), out.resolve()
    for suffix in SQLITE_COMPANIONS:
        if target == live.with_name(live.name + suffix):
            what = f"the live database's {suffix} file" if suffix else "the live database"
            raise BackupRefused(f"{out} is {what}: write the backup to another file")
    partial = out.with_name(f".{out.name}.partial")
    partial.unlink(missing_ok=True)
    source = sqlite3.connect(database, timeout=30)
    try:
        target = sqlite3.connect(partial)
        try:
            source.backup(target)
            (verdict,) = target.execute("PRAGMA integrity_check").fetchone()
            if verdict != "ok":
                raise BackupRefused(f"the copy of {database} failed its integrity check: {verdict}")
            target.execute("PRAGMA journal_mode=DELETE")
        finally:
            target.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    partial.chmod(0o600)
    os.replace(partial, out)
    return out.stat().st_size


def pg_dump_argv(settings_dict: dict, out: Path) -> tuple[list[str], dict]:
    """The ``pg_dump`` command line and the environment additions (the password) for a
    database's Django settings."""
    argv = ["pg_dump", "--format=custom", "--no-owner", f"--file={out}"]
    for flag, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
        if settings_dict.get(key):
            argv.append(f"{flag}={settings_dict[key]}")
    argv.append(settings_dict["NAME"])
    env = {"PGPASSWORD": settings_dict["PASSWORD"]} if settings_dict.get("PASSWORD") else {}
    return argv, env


def backup_postgresql(settings_dict: dict, out: Path) -> int:
    """``pg_dump`` the database into ``out``; returns its size. Raises BackupRefused when
    ``pg_dump`` is missing or fails (its own message included)."""
    if shutil.which("pg_dump") is None:
        raise BackupRefused(
            "pg_dump is not on the PATH: install the PostgreSQL client of the server's major version "
            "(Debian: apt-get install postgresql-client), or run it yourself: "
            f"pg_dump --format=custom --file={out} {settings_dict['NAME']}"
        )
    argv, extra = pg_dump_argv(settings_dict, out)
    partial = out.with_name(f".{out.name}.partial")
    argv = [arg if not arg.startswith("--file=") else f"--file={partial}" for arg in argv]
    done = subprocess.run(argv, env={**os.environ, **extra}, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BackupRefused(f"pg_dump failed (exit {done.returncode}): {done.stderr.strip()}")
    partial.chmod(0o600)
    os.replace(partial, out)
    return out.stat().st_size
