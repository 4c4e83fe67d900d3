"""Run ``manage.py`` with this process's clock skewed: ``python skewed_clock.py SECONDS manage.py ARGS…``.

Patches ``time.time`` and ``django.utils.timezone.now`` (the process's notion of now)
before Django starts; the database's clock (SQLite's reading of the OS clock, or the
PostgreSQL server's) is untouched, as on a host whose clock is wrong
(docs/design.md §11, ``clockSkew``).
"""

import runpy
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

offset = float(sys.argv[1])
real_time = time.time
time.time = lambda: real_time() + offset

from django.utils import timezone  # noqa: E402 — patched before anything imports it by name

timezone.now = lambda: datetime.fromtimestamp(time.time(), tz=UTC)
sys.argv = sys.argv[2:]
sys.path.insert(0, str(Path(sys.argv[0]).resolve().parent))  # as running manage.py itself would
runpy.run_path(sys.argv[0], run_name="__main__")
