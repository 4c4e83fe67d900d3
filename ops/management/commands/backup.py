"""``manage.py backup --out FILE`` (ops.backup; docs/production.md, "Backups and restore").

SQLite: an online, consistent copy through SQLite's backup API, safe while the runtime
writes; PostgreSQL: ``pg_dump --format=custom``. Prints ``backup: <engine> database copied
to FILE (N bytes)``; exit 1 with the reason when the copy cannot be made.
"""

import sqlite3
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from ops.backup import BackupRefused, backup_postgresql, backup_sqlite


class Command(BaseCommand):
    help = "Copy the database consistently while the runtime runs (SQLite backup API, or pg_dump)."

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, required=True, help="the backup file to write (replaced atomically)")

    def handle(self, *args, **options):
        out = options["out"].absolute()
        if not out.parent.is_dir():
            raise CommandError(f"the directory {out.parent} does not exist")
        if out.is_dir():
            raise CommandError(f"--out {out} is a directory: name the backup file to write in it")
        try:
            if connection.vendor == "sqlite":
                size = backup_sqlite(connection.settings_dict["NAME"], out)
            elif connection.vendor == "postgresql":
                size = backup_postgresql(connection.settings_dict, out)
            else:
                raise BackupRefused(f"no backup for the {connection.vendor} backend")
        except (BackupRefused, OSError, sqlite3.Error) as exc:
            raise CommandError(f"backup: {exc}") from None
        self.stdout.write(f"backup: {connection.vendor} database copied to {out} ({size} bytes)")
