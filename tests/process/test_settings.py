"""Settings read from the environment, each in a fresh process.

The start-up checks on them are ``unit/test_settings_checks.py``.
"""

import subprocess
import sys

import pytest

from tests.conftest import PROJECT_DIR


def settings_value(expression: str, **env) -> str:
    code = f"import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'factory_site.settings'; django.setup(); from django.conf import settings; print({expression})"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_DIR, env={"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "k", **env},
        capture_output=True, text=True, check=True,
    ).stdout.strip()


def test_a_relative_sqlite_file_is_relative_to_the_project():
    name = settings_value("settings.DATABASES['default']['NAME']", DATABASE_URL="sqlite:///var/demo/x.sqlite3")
    assert name == str(PROJECT_DIR / "var" / "demo" / "x.sqlite3")


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_database_url_is_the_embedded_default(empty):
    engine_and_name = settings_value("settings.DATABASES['default']['ENGINE'], settings.DATABASES['default']['NAME']",
                                     DATABASE_URL=empty)
    assert engine_and_name == f"runtime.sqlite_backend {PROJECT_DIR / 'var' / 'factory.sqlite3'}"


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout():
    options = settings_value("settings.DATABASES['default']['OPTIONS']", DATABASE_URL="sqlite:////tmp/x.sqlite3")
    assert "journal_mode=WAL" in options and "'timeout': 30" in options and "IMMEDIATE" in options


def test_the_production_settings_are_off_by_default():
    values = settings_value(
        "[settings.SECURE_SSL_REDIRECT, settings.SECURE_PROXY_SSL_HEADER, settings.SECURE_HSTS_SECONDS, "
        "settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, settings.CSRF_TRUSTED_ORIGINS, "
        "settings.EMAIL_BACKEND, settings.LOGGING['handlers']['console']['formatter']]"
    )
    assert values == "[False, None, 0, False, False, [], 'django.core.mail.backends.console.EmailBackend', 'text']"


def test_behind_a_tls_proxy_the_forwarded_proto_is_trusted_and_the_loopback_callers_are_exempt():
    values = settings_value(
        "[settings.SECURE_PROXY_SSL_HEADER, settings.SECURE_REDIRECT_EXEMPT, settings.CSRF_TRUSTED_ORIGINS, "
        "settings.ADMINS, settings.EMAIL_HOST, settings.EMAIL_USE_TLS]",
        DJANGO_BEHIND_TLS_PROXY="true", DJANGO_CSRF_TRUSTED_ORIGINS="https://factory.example.org",
        DJANGO_ADMINS="Ops:ops@example.org", DJANGO_EMAIL_URL="smtp+tls://u:p@mail.example.org:587",
    )
    assert values == (
        "[('HTTP_X_FORWARDED_PROTO', 'https'), ['^events$', '^status$', '^metrics$'], "
        "['https://factory.example.org'], [('Ops', 'ops@example.org')], 'mail.example.org', True]"
    )


def conn_settings(**env) -> str:
    return settings_value("[settings.DATABASES['default'].get(k) for k in ('CONN_MAX_AGE', 'CONN_HEALTH_CHECKS')]", **env)


@pytest.mark.parametrize("url", ["sqlite:////tmp/x.sqlite3", "postgres://factory@127.0.0.1:5432/factory"])
def test_database_connections_persist_for_a_minute_with_health_checks_by_default(url):
    assert conn_settings(DATABASE_URL=url) == "[60, True]"


def test_a_conn_max_age_of_0_opens_a_connection_per_request_and_the_url_wins():
    assert conn_settings(DATABASE_URL="sqlite:////tmp/x.sqlite3", FACTORY_DB_CONN_MAX_AGE="0") == "[0, True]"
    assert conn_settings(DATABASE_URL="postgres://f@127.0.0.1/f?conn_max_age=5", FACTORY_DB_CONN_MAX_AGE="300") == "[5, True]"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("FACTORY_DB_CONN_MAX_AGE", "-1", "FACTORY_DB_CONN_MAX_AGE must be 0 or more seconds, not -1"),
    ("FACTORY_LOG_FORMAT", "xml", "FACTORY_LOG_FORMAT must be text or json, not 'xml'"),
    ("FACTORY_STATIC_STORAGE", "cdn", "FACTORY_STATIC_STORAGE must be manifest or finders, not 'cdn'"),
    ("DJANGO_ADMINS", "ops@example.org", "DJANGO_ADMINS is a list of Name:address pairs"),
])
def test_a_bad_value_stops_the_settings_with_its_reason(name, value, message):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        settings_value("1", **{name: value})
    assert message in failed.value.stderr


def test_static_files_use_finders_unless_the_manifest_is_chosen(tmp_path):
    expression = "[settings.STORAGES['staticfiles']['BACKEND'], settings.WHITENOISE_USE_FINDERS, settings.STATIC_ROOT]"
    assert settings_value(expression, FACTORY_VAR_DIR=str(tmp_path)) == (
        "['django.contrib.staticfiles.storage.StaticFilesStorage', True, None]"
    )
    assert settings_value(expression, FACTORY_VAR_DIR=str(tmp_path), FACTORY_STATIC_STORAGE="manifest") == (
        f"['whitenoise.storage.CompressedManifestStaticFilesStorage', False, PosixPath('{tmp_path}/static')]"
    )


NOT_A_BOOLEAN = "is not a boolean: write true, yes, on, 1 or false, no, off, 0"
BOOLEANS = [
    "DJANGO_DEBUG", "DJANGO_BEHIND_TLS_PROXY", "DJANGO_SECURE_SSL_REDIRECT", "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "DJANGO_SECURE_HSTS_PRELOAD", "DJANGO_SESSION_COOKIE_SECURE", "DJANGO_CSRF_COOKIE_SECURE", "FACTORY_FAKE_AGENTS",
]


@pytest.mark.parametrize("name", BOOLEANS)
@pytest.mark.parametrize("value", ["maybe", "2", "-1", "ok", "y", "enabled"])
def test_a_boolean_setting_in_another_spelling_stops_the_settings_naming_it(name, value):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        settings_value("1", **{name: value})
    assert f"ImproperlyConfigured: {name}={value!r} {NOT_A_BOOLEAN}" in failed.value.stderr


@pytest.mark.parametrize(("value", "read"), [
    ("true", "True"), ("TRUE", "True"), (" yes ", "True"), ("On", "True"), ("1", "True"),
    ("false", "False"), ("No", "False"), ("off", "False"), ("0", "False"), ("", "False"), ("  ", "False"),
])
def test_a_boolean_setting_reads_its_spellings_and_empty_is_the_default(value, read):
    assert settings_value("settings.DEBUG", DJANGO_DEBUG=value) == read


@pytest.mark.parametrize(("name", "value", "refusal"), [
    ("FACTORY_LEASE_SECONDS", "abc", "FACTORY_LEASE_SECONDS='abc' cannot be read: invalid literal for int() with base 10: 'abc'"),
    ("FACTORY_DB_CONN_MAX_AGE", "1.5", "FACTORY_DB_CONN_MAX_AGE='1.5' cannot be read: invalid literal for int() with base 10: '1.5'"),
    ("FACTORY_LOG_LEVEL", "bogus", "FACTORY_LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not 'BOGUS'"),
    ("DATABASE_URL", "garbage",
     "DATABASE_URL='garbage' is not a database URL: postgres://user@host:5432/name or sqlite:////absolute/path"),
    ("FACTORY_LOG_FORMAT", "xml", "FACTORY_LOG_FORMAT must be text or json, not 'xml'"),
    ("DJANGO_DEBUG", "maybe", f"DJANGO_DEBUG='maybe' {NOT_A_BOOLEAN}"),
    ("DJANGO_SECURE_SSL_REDIRECT", "ture", f"DJANGO_SECURE_SSL_REDIRECT='ture' {NOT_A_BOOLEAN}"),
    ("DJANGO_BEHIND_TLS_PROXY", "2", f"DJANGO_BEHIND_TLS_PROXY='2' {NOT_A_BOOLEAN}"),
])
def test_manage_refuses_a_bad_setting_in_one_line_exits_2_and_starts_nothing(name, value, refusal):
    done = subprocess.run(
        [sys.executable, "manage.py", "runserve", "--bind", "127.0.0.1:1"], cwd=PROJECT_DIR,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "k", name: value}, capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [
        refusal, "The settings are read from the environment and .env (docs/production.md §3); nothing was started."])


def test_a_lower_case_log_level_is_taken():
    assert settings_value("settings.LOGGING['root']['level']", FACTORY_LOG_LEVEL="debug") == "DEBUG"
