"""The environment as the settings read it (django-environ), each value refused by its name.

django-environ reads ``FACTORY_LEASE_SECONDS=abc`` with ``int()``, and a traceback ends with
"invalid literal for int() with base 10" naming no setting; ``DATABASE_URL=garbage`` ends with
``KeyError: 'ENGINE'``. Here both are ``ImproperlyConfigured`` naming the variable and its
value, which ``manage.py`` prints as one line (docs/production.md §3). A boolean reads only
the spellings of ``TRUE_WORDS`` and ``FALSE_WORDS``: django-environ reads any other word
(``DJANGO_DEBUG=maybe``, ``DJANGO_SECURE_SSL_REDIRECT=ture``) as false, silently.
"""

import logging
import os
import warnings

import environ
from django.core.exceptions import ImproperlyConfigured

#: The spellings of a boolean setting, in any letter case, spaces around ignored; empty is the default.
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


class NamedEnv(environ.Env):
    """``environ.Env`` whose unreadable values raise ``ImproperlyConfigured`` naming the variable."""

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{var}={os.environ.get(var, '')!r} cannot be read: {exc}") from None

    def bool(self, var, default=environ.Env.NOTSET):
        """``var`` as true or false; ``ImproperlyConfigured`` naming it for any other word."""
        raw = self.str(var, default="")
        word = raw.strip().lower()
        if not word:
            return super().bool(var, default=default) if default is environ.Env.NOTSET else default
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ImproperlyConfigured(
                f"{var}={raw!r} is not a boolean: write {', '.join(TRUE_WORDS)} or {', '.join(FALSE_WORDS)}"
            )
        return word in TRUE_WORDS

    def db_url(self, var=environ.Env.DEFAULT_DATABASE_ENV, default=environ.Env.NOTSET, engine=None):
        try:
            with warnings.catch_warnings():  # its "Engine not recognized" warning: refused below instead
                warnings.simplefilter("ignore")
                config = super().db_url(var, default=default, engine=engine)
        except (ValueError, KeyError):
            config = {}
        if not config.get("ENGINE"):
            raise ImproperlyConfigured(
                f"{var}={os.environ.get(var, '')!r} is not a database URL: postgres://user@host:5432/name or "
                "sqlite:////absolute/path"
            )
        return config

    def log_level(self, var: str, default: str) -> str:
        """A logging level's name (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``, ``CRITICAL``)."""
        value = self.str(var, default=default).upper()
        if not isinstance(logging.getLevelName(value), int):
            raise ImproperlyConfigured(f"{var} must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not {value!r}")
        return value
