"""Settings for the Factory event runtime.

Every setting comes from the environment (django-environ); `.env.example` documents
each one. The runtime's own knobs live under ``FACTORY_`` and are read only here, so
the rest of the code reads ``settings.FACTORY_*`` and never the environment.
"""

import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from factory_site import __version__
from factory_site.settings_env import NamedEnv

BASE_DIR = Path(__file__).resolve().parent.parent
#: The product's version (factory_site.__version__), for the layers that may not import the site.
PRODUCT_VERSION = __version__

env = NamedEnv()
environ.Env.read_env(BASE_DIR / ".env")

#: The runtime's own files: the SQLite database, the secret key, run output, collected static
#: files, the HTTP workers' metric files. A host keeps it outside the checkout (docs/production.md).
VAR_DIR = Path(env.str("FACTORY_VAR_DIR", default=str(BASE_DIR / "var")))


def _persistent_secret_key() -> str:
    """A key generated on first use and kept in ``var/secret_key`` (ignored by git)."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _persistent_secret_key()
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])

# --- behind a TLS proxy (docs/production.md, config/production.env.example) ---------------
# Every one is off by default: the laptop runtime speaks plain HTTP on loopback.
#: Trust the proxy's ``X-Forwarded-Proto: https`` (only when the proxy sets it on every request).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env.bool("DJANGO_BEHIND_TLS_PROXY", default=False) else None
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
#: The loopback callers that never pass the proxy: the host-clock bridge posts to
#: ``FACTORY_SERVE_URL`` (``/events``), monitors poll ``/status`` and ``/metrics``. Each
#: authenticates itself (HMAC, bearer token), not through a cookie.
SECURE_REDIRECT_EXEMPT = [r"^events$", r"^status$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=False)
#: The https origins the inbox is reached at (``https://factory.example.org``): CSRF checks the
#: Origin of every POST against them.
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
#: A form sent without its CSRF token (a page left open past its session) gets the operator's 403 page.
CSRF_FAILURE_VIEW = "factory_site.requests.csrf_failure"

# --- e-mail (Django's error mails to ADMINS, password resets) -------------------------------
# DJANGO_EMAIL_URL as django-environ reads it: smtp+tls://user:password@host:587, or the
# default consolemail:// (written to the log stream, sent nowhere).
vars().update(env.email_url("DJANGO_EMAIL_URL", default="consolemail://"))
DEFAULT_FROM_EMAIL = env.str("DJANGO_DEFAULT_FROM_EMAIL", default="factory@localhost")
SERVER_EMAIL = env.str("DJANGO_SERVER_EMAIL", default=DEFAULT_FROM_EMAIL)
#: ``name <address>`` pairs as ``Name:address,Name:address``; Django mails them a 500's traceback.
ADMINS = [tuple(pair.split(":", 1)) for pair in env.list("DJANGO_ADMINS", default=[])]
if any(len(admin) != 2 or not all(admin) for admin in ADMINS):
    raise ImproperlyConfigured("DJANGO_ADMINS is a list of Name:address pairs, e.g. Operations:ops@example.org")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "runtime",
    "intake",
    "schedules",
    "ops",
]

MIDDLEWARE = [
    # Outermost: /events and /github get their request id, the security middleware's work and
    # their count in the intake counters here in one call, then go to their views past only
    # CommonMiddleware and XFrameOptionsMiddleware: a signed door needs no static files,
    # session, CSRF or login (factory_site.door_route).
    "factory_site.door_route.SignedDoorMiddleware",
    # Every other answer, and every log line written while serving it, carries the id.
    "factory_site.requests.RequestIdMiddleware",
    # Counts the intake doors' answers as they leave (ops.metrics_intake); the doors count in door_route.
    "ops.metrics_intake.IntakeAnswersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "ops.query_nul.QueryNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The person's time zone for the pages' instants (ops.web.zones).
    "ops.web.zones.ReaderZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "factory_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # Every operator page's title begins with the pending count: (3) Loops | Factory runtime.
                "runtime.admin.live.pending_proposals",
                # The admin's footer names the product's version.
                "factory_site.context.product_version",
            ],
        },
    },
]

WSGI_APPLICATION = "factory_site.wsgi.application"

# An empty DATABASE_URL (``DATABASE_URL= manage.py …``) is the default, as an unset one: django-environ
# would give a database with no ENGINE and a KeyError later.
if not os.environ.get("DATABASE_URL", "").strip():
    os.environ.pop("DATABASE_URL", None)
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'factory.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's SQLite backend whose transactions queue for the write lock in the kernel,
    # not in SQLite's sleeping busy handler (runtime.sqlite_backend).
    DATABASES["default"]["ENGINE"] = "runtime.sqlite_backend"
    # The test database stays in memory (Django's default for SQLite), which tools that know
    # SQLite by Django's engine name (pytest-django under xdist) are told explicitly.
    DATABASES["default"].setdefault("TEST", {}).setdefault("NAME", ":memory:")
    # A relative file (sqlite:///var/demo/factory.sqlite3) is relative to the project,
    # not to whatever directory a process runs in (commands run in their run dir).
    if DATABASES["default"]["NAME"] != ":memory:" and not Path(DATABASES["default"]["NAME"]).is_absolute():
        DATABASES["default"]["NAME"] = str(BASE_DIR / DATABASES["default"]["NAME"])
    # The slot loop, the HTTP workers and the run workers write at once: WAL lets
    # readers go on during a write, IMMEDIATE takes the write lock at BEGIN (no
    # deadlocking lock upgrades), the write turn queues the transactions, and the busy
    # time-out covers single statements and other programs (runtime.sqlite_backend).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": env.int("FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS", default=30),
    }
# Persistent connections: a request or loop iteration reuses its thread's connection for
# up to this many seconds instead of opening one (a PostgreSQL connection costs a backend
# process; signed intake at 8 clients went from 63 to 298 admissions/s, docs/performance.md).
# close_old_connections(), at every request and loop iteration, closes one that is older or
# broken; the health check replaces one the server dropped before it is used. A
# ?conn_max_age= in DATABASE_URL wins. 0 turns it off (a connection per request).
_CONN_MAX_AGE = env.int("FACTORY_DB_CONN_MAX_AGE", default=60)
if _CONN_MAX_AGE < 0:
    raise ImproperlyConfigured(f"FACTORY_DB_CONN_MAX_AGE must be 0 or more seconds, not {_CONN_MAX_AGE}")
DATABASES["default"].setdefault("CONN_MAX_AGE", _CONN_MAX_AGE)
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
if env.str("FACTORY_TEST_DB_NAME", default=""):
    # Lets two test runs share one PostgreSQL server without fighting over test_<name>.
    DATABASES["default"]["TEST"] = {"NAME": env.str("FACTORY_TEST_DB_NAME")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
#: ``manifest``: whitenoise's compressed manifest storage, served from ``STATIC_ROOT`` that
#: ``collectstatic`` filled (hashed names, cached for a year, gzip beside them) — what
#: ``bin/serve`` runs (it collects at every start, so the manifest always matches the code)
#: and the production settings name; ``finders`` (the default): the apps' own files as they
#: are, cached for 60 s, no collectstatic needed — ``manage.py runserve`` by hand, the test
#: suite, whose processes never see a stale manifest.
FACTORY_STATIC_STORAGE = env.str("FACTORY_STATIC_STORAGE", default="finders")
if FACTORY_STATIC_STORAGE not in ("manifest", "finders"):
    raise ImproperlyConfigured(f"FACTORY_STATIC_STORAGE must be manifest or finders, not {FACTORY_STATIC_STORAGE!r}")
_STATIC_MANIFEST = FACTORY_STATIC_STORAGE == "manifest"
#: Only the manifest storage has a root: with finders there is nothing collected to serve.
STATIC_ROOT = Path(env.str("FACTORY_STATIC_ROOT", default=str(VAR_DIR / "static"))) if _STATIC_MANIFEST else None
WHITENOISE_USE_FINDERS = not _STATIC_MANIFEST
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage" if _STATIC_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["ops.api.parsers.StrictJSONParser"],
    "UNAUTHENTICATED_USER": None,
}

#: ``text`` (default) or ``json`` (one object per line): every process of runserve, gunicorn's
#: error and access logs included, writes this one format to stderr/stdout (factory_site.logs).
FACTORY_LOG_FORMAT = env.str("FACTORY_LOG_FORMAT", default="text")
if FACTORY_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"FACTORY_LOG_FORMAT must be text or json, not {FACTORY_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"()": "factory_site.logs.TextFormatter"},
        "json": {"()": "factory_site.logs.JsonFormatter"},
    },
    "filters": {"refusal_without_traceback": {"()": "factory_site.logs.RefusalWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": FACTORY_LOG_FORMAT,
                             "filters": ["refusal_without_traceback"]}},
    "root": {"handlers": ["console"], "level": env.log_level("FACTORY_LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A request for a host this server does not serve is a client's 400 (anyone who can
        # reach the port can send one): written once, as a warning, never mailed to ADMINS
        # (Django's "django" logger mails every ERROR under it).
        "django.security": {"handlers": ["console"], "propagate": False},
    },
}

# --- the approval API and its OpenAPI description (docs/api.md) ---------------------------
INSTALLED_APPS += ["drf_spectacular", "drf_spectacular_sidecar"]
REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = "drf_spectacular.openapi.AutoSchema"
SPECTACULAR_SETTINGS = {
    "TITLE": "Factory event runtime",
    "DESCRIPTION": "The intake doors, the schedule and status reads and the approval API (docs/api.md).",
    "VERSION": __version__,
    "SERVE_INCLUDE_SCHEMA": False,
    # The browsable page is served from the sidecar's static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "ProposalStatusEnum": "runtime.models.ProposalStatus",
        "RunStatusEnum": "runtime.models.RunStatus",
        "PreviewStatusEnum": "runtime.models.PreviewStatus",
    },
}

# --- the runtime's own settings (docs/design.md §10) ---------------------------------------
FACTORY_REGISTRY_DIR = Path(env.str("FACTORY_REGISTRY_DIR", default=str(BASE_DIR / "registry")))
FACTORY_CONFIG_DIR = Path(env.str("FACTORY_CONFIG_DIR", default=str(BASE_DIR / "config")))
FACTORY_ROOT = Path(env.str("FACTORY_ROOT", default=str(BASE_DIR / "examples" / "factory")))
FACTORY_RUNS_DIR = Path(env.str("FACTORY_RUNS_DIR", default=str(VAR_DIR / "runs")))
FACTORY_EVENTS_SECRET = env.str("FACTORY_EVENTS_SECRET", default="")
FACTORY_GITHUB_WEBHOOK_SECRET = env.str("FACTORY_GITHUB_WEBHOOK_SECRET", default="")
FACTORY_API_TOKEN = env.str("FACTORY_API_TOKEN", default="")
FACTORY_CATCHUP_LIMIT = env.int("FACTORY_CATCHUP_LIMIT", default=1000)
FACTORY_PILEUP_THRESHOLD = env.int("FACTORY_PILEUP_THRESHOLD", default=3)
# A pause without --until older than this is the doctor's longPauses anomaly (docs/schedules.md, "Pausing a loop").
FACTORY_PAUSE_WARN_SECONDS = env.int("FACTORY_PAUSE_WARN_SECONDS", default=86400)
# The run queue is backed up — the doctor's runBacklog — when its oldest queued run waited longer
# than this many seconds, or when more than this many runs are queued (docs/design.md §11).
FACTORY_BACKLOG_WARN_SECONDS = env.int("FACTORY_BACKLOG_WARN_SECONDS", default=600)
FACTORY_BACKLOG_WARN_RUNS = env.int("FACTORY_BACKLOG_WARN_RUNS", default=1000)
FACTORY_LEASE_SECONDS = env.int("FACTORY_LEASE_SECONDS", default=60)
FACTORY_STOP_GRACE_SECONDS = env.int("FACTORY_STOP_GRACE_SECONDS", default=20)
FACTORY_STDOUT_CAP_BYTES = env.int("FACTORY_STDOUT_CAP_BYTES", default=1024 * 1024)
#: How many previews planning lets wait at once; beyond, a proposal is "not previewed" until
#: a person asks (docs/design.md §8, Previews).
FACTORY_PREVIEW_QUEUE = env.int("FACTORY_PREVIEW_QUEUE", default=50)
#: A preview older than this many seconds is called stale on the confirmation page, which offers to preview again.
FACTORY_PREVIEW_MAX_AGE_SECONDS = env.int("FACTORY_PREVIEW_MAX_AGE_SECONDS", default=900)
#: How long a request's head and body may take to arrive, in seconds, before gunicorn drops
#: it (docs/design.md §10: a slow client cannot hold a thread).
FACTORY_HTTP_READ_SECONDS = env.float("FACTORY_HTTP_READ_SECONDS", default=5.0)
FACTORY_SERVE_URL = env.str("FACTORY_SERVE_URL", default="http://127.0.0.1:7522")
#: Where runserve's HTTP workers keep their intake counters (prometheus_client's multiprocess
#: files), one directory per bound address, emptied when that runserve starts (ops.metrics).
FACTORY_METRICS_DIR = Path(env.str("FACTORY_METRICS_DIR", default=str(VAR_DIR / "metrics")))
#: Where ``prune`` writes the archive of what it deletes (JSON Lines, gzip), one file per prune.
FACTORY_ARCHIVE_DIR = Path(env.str("FACTORY_ARCHIVE_DIR", default=str(VAR_DIR / "archive")))
#: ``prune``'s default window: what is older than this many days goes (docs/production.md).
FACTORY_RETENTION_DAYS = env.int("FACTORY_RETENTION_DAYS", default=90)
#: The window of the recent-activity figures of /metrics, in seconds (ops.metrics).
FACTORY_METRICS_WINDOW_SECONDS = env.int("FACTORY_METRICS_WINDOW_SECONDS", default=3600)
#: What a watched loop must show before ``schedule report`` says it earned auto: a window of at
#: least this many days, and at least this many runs approved by a person and succeeded (twice
#: that for a mutating definition). Floors 7 and 10: a setting may tighten them, never loosen
#: them (``runtime.E003``; docs/schedules.md, "Earning auto").
FACTORY_EARN_WINDOW_DAYS = env.int("FACTORY_EARN_WINDOW_DAYS", default=7)
FACTORY_EARN_MIN_RUNS = env.int("FACTORY_EARN_MIN_RUNS", default=10)
FACTORY_AGENT_COMMAND = env.str("FACTORY_AGENT_COMMAND", default="")
# The demo and tests: plan every agent definition with the fake adapter (docs/design.md §8).
FACTORY_FAKE_AGENTS = env.bool("FACTORY_FAKE_AGENTS", default=False)
FACTORY_OPERATOR_USERNAME = env.str("FACTORY_OPERATOR_USERNAME", default="operator")
FACTORY_OPERATOR_PASSWORD = env.str("FACTORY_OPERATOR_PASSWORD", default="")
# Notifications (docs/notifications.md): off unless a channel is set.
FACTORY_NOTIFY_EMAIL_TO = env.list("FACTORY_NOTIFY_EMAIL_TO", default=[])
FACTORY_NOTIFY_WEBHOOK_URL = env.str("FACTORY_NOTIFY_WEBHOOK_URL", default="")
FACTORY_NOTIFY_SECRET = env.str("FACTORY_NOTIFY_SECRET", default="")
FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS = env.int("FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS", default=3600)
FACTORY_NOTIFY_MAX_ATTEMPTS = env.int("FACTORY_NOTIFY_MAX_ATTEMPTS", default=8)
# Tests only (tests/conftest.py): lets ``flush`` reset a test database, journal included,
# through the journal guard's one door (runtime/management/commands/flush.py). Never read
# from the environment: no deployment can switch it on.
FACTORY_FLUSH_EMPTIES_JOURNAL = False
