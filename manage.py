#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys


def main():
    """Run administrative tasks."""
    os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'factory_site.settings')
    # Django sets TZ to its TIME_ZONE (UTC) when it loads the settings: the person's own zone,
    # which ``--local`` without a zone shows, is kept first (runtime.management.local_times).
    os.environ.setdefault('FACTORY_HOST_TZ', os.environ.get('TZ', ''))
    try:
        from django.core.management import execute_from_command_line
    except ImportError as exc:
        raise ImportError(
            "Couldn't import Django. Are you sure it's installed and "
            "available on your PYTHONPATH environment variable? Did you "
            "forget to activate a virtual environment?"
        ) from exc
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.db.utils import OperationalError, ProgrammingError

    try:
        _ = settings.INSTALLED_APPS  # loads the settings: a value the environment gives them is checked here
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"{exc}\nThe settings are read from the environment and .env (docs/production.md §3); "
                         "nothing was started.\n")
        sys.exit(2)
    try:
        execute_from_command_line(sys.argv)
    except (OperationalError, ProgrammingError) as exc:
        if not missing_table(exc):
            raise
        sys.stderr.write(f"{str(exc).splitlines()[0]}\nThe database has no tables yet: run `manage.py migrate` (bin/setup does) "
                         "and try again.\n")
        sys.exit(2)


def missing_table(exc: Exception) -> bool:
    """Whether a database error says a table does not exist: SQLite's "no such table",
    PostgreSQL's undefined_table (SQLSTATE 42P01)."""
    return "no such table" in str(exc) or getattr(exc.__cause__, "sqlstate", None) == "42P01"


if __name__ == '__main__':
    main()
