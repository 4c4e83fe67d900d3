"""The peers' side of ``bench/peers_bench.py``: one child process measures one peer at one N.

Not a test, and not for the project's virtualenv: ``bench/peers_bench.py`` runs this file
with the peers' own interpreter (``var/bench-peers-venv/``, ``bench/requirements-peers.txt``)
as ``python bench/peers_children.py SYSTEM N DATABASE_URL``, on an empty throw-away
database (``sqlite:////tmp/…`` or ``postgres://…``). It prints one JSON line: the figures,
the database's version and the peers' package versions. Nothing is sent anywhere: the
sending of each peer is replaced by a counter.

- ``celery-beat``: django-celery-beat's ``DatabaseScheduler`` as ``celery beat --scheduler
  django_celery_beat.schedulers:DatabaseScheduler`` runs it — a minimal Django settings
  module (``USE_TZ``, UTC, persistent connections as this runtime's default
  ``FACTORY_DB_CONN_MAX_AGE``) written to a temporary directory, migrated; N
  ``PeriodicTask``s on one 60 s ``IntervalSchedule``, every ``last_run_at`` one interval
  before an instant ``lead`` seconds ahead. The scheduler is built and ticked once before
  that instant (its initial read of every task and its heap, as a running beat has them),
  then, from the instant on, **burst** = ``tick()`` called as beat's loop calls it until
  every task has been sent once, then the ``sync()`` that writes their ``last_run_at``
  (beat writes them every 3 minutes; the burst ends when they are durable). The Celery app
  has an in-memory broker (``memory://``) and the scheduler's ``send_task`` only counts.
  **idle** = one ``tick()`` with nothing due, median of ``IDLE_SAMPLES``.
- ``apscheduler``: APScheduler 3's scheduler with one ``SQLAlchemyJobStore`` on the database
  and an executor that only counts submissions; N interval jobs (60 s) whose
  ``next_run_time`` is now. **burst** = ``_process_jobs()`` (the body of
  ``BlockingScheduler``'s loop) until every job has been submitted once and its next run
  time stored (the store commits each ``update_job``); **idle** = one ``_process_jobs()``
  with nothing due, median of ``IDLE_SAMPLES``.

On SQLite both peers get this runtime's settings: WAL and ``synchronous=NORMAL`` (without
them each of their one-row commits waits for a full sync of the file).
A burst that outlasts the interval (60 s) leaves no instant with nothing due: its idle
figures are then ``null``.
Statements are counted for both (Django's ``execute_wrapper``; SQLAlchemy's
``before_cursor_execute``), BEGIN and COMMIT not included.
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

#: Idle iterations measured, as ``bench/peers_bench.py``'s (its comment says why 50).
IDLE_SAMPLES = 50
INTERVAL_SECONDS = 60
#: This runtime's SQLite settings (factory_site/settings.py), given to both peers too.
SQLITE_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")
PACKAGES = ("django-celery-beat", "celery", "Django", "APScheduler", "SQLAlchemy", "psycopg")


def versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in PACKAGES}


def django_database(url: str) -> dict:
    """Django's ``DATABASES["default"]`` for a ``sqlite:///PATH`` or ``postgres://USER@HOST:PORT/NAME`` URL."""
    parts = urlsplit(url)
    common = {"CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True}
    if parts.scheme == "sqlite":
        options = {"init_command": "; ".join(SQLITE_PRAGMAS), "transaction_mode": "IMMEDIATE"}
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parts.path, "OPTIONS": options, **common}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username or "",
        "PASSWORD": parts.password or "",
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        **common,
    }


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy URL of the same database (psycopg 3 as PostgreSQL's driver)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


SETTINGS = """\
SECRET_KEY = "peers-bench"
INSTALLED_APPS = ["django_celery_beat"]
DATABASES = {{"default": {database!r}}}
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
"""


def celery_beat(loops: int, url: str) -> dict:
    settings_dir = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    (settings_dir / "peers_settings.py").write_text(SETTINGS.format(database=django_database(url)))
    sys.path.insert(0, str(settings_dir))
    os.environ["DJANGO_SETTINGS_MODULE"] = "peers_settings"
    import django

    django.setup()
    shutil.rmtree(settings_dir)  # the settings module is imported: its file is no longer needed
    from celery import Celery
    from django.core.management import call_command
    from django.db import connection
    from django_celery_beat.models import IntervalSchedule, PeriodicTask
    from django_celery_beat.schedulers import DatabaseScheduler

    call_command("migrate", verbosity=0)
    app = Celery("peers_bench", broker="memory://", set_as_current=True)
    app.conf.update(timezone="UTC", enable_utc=True, task_always_eager=False)
    sent, sent_once = [], set()

    class CountingScheduler(DatabaseScheduler):
        def send_task(self, name, args=None, kwargs=None, **options):
            sent.append(options["headers"]["periodic_task_name"])
            sent_once.add(sent[-1])

    every = IntervalSchedule.objects.create(every=INTERVAL_SECONDS, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.bulk_create(
        [PeriodicTask(name=f"loop-{i:06d}", task="peers_bench.noop", interval=every) for i in range(loops)],
        batch_size=1000,
    )
    # The initial read builds an entry per task and calls is_due() on each: it has
    # ``lead`` seconds to finish before every task falls due.
    lead = 2.0 + loops * 0.001
    due_at = datetime.now(UTC) + timedelta(seconds=lead)
    PeriodicTask.objects.update(last_run_at=due_at - timedelta(seconds=INTERVAL_SECONDS))
    scheduler = CountingScheduler(app=app)
    scheduler.__dict__["producer"] = None  # beat's broker connection is never opened
    if scheduler.tick() <= 0 or sent:
        raise SystemExit(f"celery-beat {loops}: the scheduler's warm-up outlasted its lead of {lead:.1f} s")
    time.sleep(max(0.0, (due_at - datetime.now(UTC)).total_seconds()) + 0.05)

    statements = Counter()
    with connection.execute_wrapper(statements):
        start = time.perf_counter()
        # Until each task has been sent once: a burst longer than the interval sends the
        # first tasks again (their next interval) before the last is sent.
        while len(sent_once) < loops:
            if scheduler.tick() > 0:
                raise SystemExit(
                    f"celery-beat {loops}: the scheduler would sleep with {loops - len(sent_once)} tasks unsent"
                )
        sent_s = time.perf_counter() - start
        scheduler.sync()
        burst_s = time.perf_counter() - start
    burst_statements = statements.total
    sends = len(sent)
    stored = PeriodicTask.objects.filter(last_run_at__gte=due_at, total_run_count__gte=1).count()
    if stored != loops:
        raise SystemExit(f"celery-beat {loops}: {len(sent_once)} sent, {stored} stored")

    samples, statements = [], Counter()
    with connection.execute_wrapper(statements):
        for _ in range(IDLE_SAMPLES if burst_s < INTERVAL_SECONDS else 0):
            start = time.perf_counter()
            delay = scheduler.tick()
            samples.append(time.perf_counter() - start)
            if delay <= 0 or len(sent) != sends:
                raise SystemExit(f"celery-beat {loops}: an idle tick sent a task")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            database = f"PostgreSQL {cursor.fetchone()[0].split()[0]}"
        else:
            cursor.execute("SELECT sqlite_version()")
            database = f"SQLite {cursor.fetchone()[0]}"
    return {
        "database": database,
        "burstSeconds": burst_s,
        "sentSeconds": sent_s,
        "sends": sends,
        "burstStatements": burst_statements,
        "idleMilliseconds": statistics.median(samples) * 1000 if samples else None,
        "idleStatements": statements.total / IDLE_SAMPLES if samples else None,
    }


def apscheduler(loops: int, url: str) -> dict:
    import pickle

    from apscheduler.executors.base import BaseExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.base import BaseScheduler
    from apscheduler.util import datetime_to_utc_timestamp
    from sqlalchemy import create_engine, event, insert, text

    class CountingExecutor(BaseExecutor):
        submitted = 0

        def _do_submit_job(self, job, run_times):
            CountingExecutor.submitted += 1

    class LoopScheduler(BaseScheduler):
        """``BlockingScheduler`` without its loop: the bench calls ``_process_jobs`` itself."""

        def wakeup(self):
            pass

        def shutdown(self, wait=True):
            super().shutdown(wait)

    engine = create_engine(sqlalchemy_url(url))
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def pragmas(dbapi_connection, record):
            for pragma in SQLITE_PRAGMAS:
                dbapi_connection.execute(pragma)

    store = SQLAlchemyJobStore(engine=engine)
    scheduler = LoopScheduler(jobstores={"default": store}, executors={"default": CountingExecutor()}, timezone=UTC)
    scheduler.start()
    now = datetime.now(UTC)
    template = scheduler.add_job(
        "time:time", "interval", seconds=INTERVAL_SECONDS, id="loop-000000", next_run_time=now + timedelta(hours=1)
    )
    state = template.__getstate__()
    store.remove_job(template.id)
    rows = []
    for i in range(loops):
        state.update(id=f"loop-{i:06d}", next_run_time=now)
        rows.append(
            {
                "id": state["id"],
                "next_run_time": datetime_to_utc_timestamp(now),
                "job_state": pickle.dumps(state, store.pickle_protocol),
            }
        )
    with engine.begin() as connection:
        for chunk in range(0, loops, 1000):
            connection.execute(insert(store.jobs_t), rows[chunk : chunk + 1000])

    statements = Counter()
    event.listen(engine, "before_cursor_execute", statements.sqlalchemy)
    start = time.perf_counter()
    while CountingExecutor.submitted < loops:
        scheduler._process_jobs()
    burst_s = time.perf_counter() - start
    burst_statements = statements.total
    due_after = now.timestamp() + INTERVAL_SECONDS - 1
    with engine.connect() as connection:
        stored = connection.execute(
            text("SELECT count(*) FROM apscheduler_jobs WHERE next_run_time >= :t"), {"t": due_after}
        ).scalar()
    if CountingExecutor.submitted != loops or stored != loops:
        raise SystemExit(f"apscheduler {loops}: {CountingExecutor.submitted} submitted, {stored} stored")

    samples = []
    statements.total = 0
    for _ in range(IDLE_SAMPLES if burst_s < INTERVAL_SECONDS else 0):
        start = time.perf_counter()
        scheduler._process_jobs()
        samples.append(time.perf_counter() - start)
    idle_statements = statements.total / IDLE_SAMPLES if samples else None
    if CountingExecutor.submitted != loops:
        raise SystemExit(f"apscheduler {loops}: an idle _process_jobs submitted a job")
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            database = f"PostgreSQL {connection.execute(text('SHOW server_version')).scalar().split()[0]}"
        else:
            database = f"SQLite {connection.execute(text('SELECT sqlite_version()')).scalar()}"
    engine.dispose()
    return {
        "database": database,
        "burstSeconds": burst_s,
        "burstStatements": burst_statements,
        "idleMilliseconds": statistics.median(samples) * 1000 if samples else None,
        "idleStatements": idle_statements,
    }


class Counter:
    """Counts statements: a Django ``execute_wrapper`` when called, a SQLAlchemy listener as ``sqlalchemy``."""

    def __init__(self):
        self.total = 0

    def __call__(self, execute, sql, params, many, context):
        self.total += 1
        return execute(sql, params, many, context)

    def sqlalchemy(self, conn, cursor, statement, parameters, context, executemany):
        self.total += 1


SYSTEMS = {"celery-beat": celery_beat, "apscheduler": apscheduler}

if __name__ == "__main__":
    system, loops, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    result = SYSTEMS[system](loops, url)
    print(json.dumps({"system": system, "loops": loops, **result, "versions": versions()}))
