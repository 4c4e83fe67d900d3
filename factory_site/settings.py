"""Settings for the Factory event runtime.

Every setting comes from the environment (django-environ); `.env.example` documents
each one. The runtime's own knobs live under ``FACTORY_`` and are read only here, so
the rest of the code reads ``settings.FACTORY_*`` and never the environment.
"""

import secrets
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")


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
    # Outermost: every answer, and every log line written while serving it, carries the id.
    "factory_site.requests.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
            ],
        },
    },
]

WSGI_APPLICATION = "factory_site.wsgi.application"

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'factory.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A relative file (sqlite:///var/demo/factory.sqlite3) is relative to the project,
    # not to whatever directory a process runs in (commands run in their run dir).
    if DATABASES["default"]["NAME"] != ":memory:" and not Path(DATABASES["default"]["NAME"]).is_absolute():
        DATABASES["default"]["NAME"] = str(BASE_DIR / DATABASES["default"]["NAME"])
    # The slot loop, the HTTP workers and the run workers write at once: WAL lets
    # readers go on during a write, IMMEDIATE takes the write lock at BEGIN (no
    # deadlocking lock upgrades), and the busy time-out makes writers queue.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": env.int("FACTORY_SQLITE_BUSY_TIMEOUT_SECONDS", default=30),
    }
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
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "UNAUTHENTICATED_USER": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "factory_site.requests.RequestIdLogFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("FACTORY_LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- the approval API and its OpenAPI description (docs/api.md) ---------------------------
INSTALLED_APPS += ["drf_spectacular", "drf_spectacular_sidecar"]
REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = "drf_spectacular.openapi.AutoSchema"
SPECTACULAR_SETTINGS = {
    "TITLE": "Factory event runtime",
    "DESCRIPTION": "The intake doors, the schedule and status reads and the approval API (docs/api.md).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The browsable page is served from the sidecar's static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "ProposalStatusEnum": "runtime.models.ProposalStatus",
        "RunStatusEnum": "runtime.models.RunStatus",
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
FACTORY_LEASE_SECONDS = env.int("FACTORY_LEASE_SECONDS", default=60)
FACTORY_STOP_GRACE_SECONDS = env.int("FACTORY_STOP_GRACE_SECONDS", default=20)
FACTORY_STDOUT_CAP_BYTES = env.int("FACTORY_STDOUT_CAP_BYTES", default=1024 * 1024)
#: How long a request's head and body may take to arrive, in seconds, before gunicorn drops
#: it (docs/design.md §10: a slow client cannot hold a thread).
FACTORY_HTTP_READ_SECONDS = env.float("FACTORY_HTTP_READ_SECONDS", default=5.0)
FACTORY_SERVE_URL = env.str("FACTORY_SERVE_URL", default="http://127.0.0.1:7522")
FACTORY_AGENT_COMMAND = env.str("FACTORY_AGENT_COMMAND", default="")
# The demo and tests: plan every agent definition with the fake adapter (docs/design.md §8).
FACTORY_FAKE_AGENTS = env.bool("FACTORY_FAKE_AGENTS", default=False)
FACTORY_OPERATOR_USERNAME = env.str("FACTORY_OPERATOR_USERNAME", default="operator")
FACTORY_OPERATOR_PASSWORD = env.str("FACTORY_OPERATOR_PASSWORD", default="")
# Notifications (docs/notifications.md): off unless a channel is set.
FACTORY_NOTIFY_EMAIL_TO = env.list("FACTORY_NOTIFY_EMAIL_TO", default=[])
# Django's EMAIL_* settings from one URL (smtp://user:password@host:587/?tls=True, consolemail://).
vars().update(env.email_url("FACTORY_NOTIFY_EMAIL_URL", default="smtp://localhost:25"))
DEFAULT_FROM_EMAIL = env.str("FACTORY_NOTIFY_EMAIL_FROM", default="factory@localhost")
FACTORY_NOTIFY_WEBHOOK_URL = env.str("FACTORY_NOTIFY_WEBHOOK_URL", default="")
FACTORY_NOTIFY_SECRET = env.str("FACTORY_NOTIFY_SECRET", default="")
FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS = env.int("FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS", default=3600)
FACTORY_NOTIFY_MAX_ATTEMPTS = env.int("FACTORY_NOTIFY_MAX_ATTEMPTS", default=8)
# Tests only (tests/conftest.py): lets ``flush`` reset a test database, journal included,
# through the journal guard's one door (runtime/management/commands/flush.py). Never read
# from the environment: no deployment can switch it on.
FACTORY_FLUSH_EMPTIES_JOURNAL = False
