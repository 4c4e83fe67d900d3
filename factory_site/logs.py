"""The one log format of every process of ``runserve`` (docs/production.md, "Logs").

Every line — Django's, the runtime's, gunicorn's error log and its access log, in the HTTP
workers, the slot loop, the run workers and any ``manage.py`` command — is written by one of
two formatters, chosen by ``FACTORY_LOG_FORMAT``:

- ``text`` (the default): ``<at> <LEVEL> <logger>[<pid>] <message>`` then every structured
  field as `` key=value`` (a value with a space, a quote, an equals sign or a control
  character is written as a JSON string), the traceback of an exception, and last
  `` requestId=<id>`` on a line written while a request is served. A control character of
  the message is written as an escape (``\\n``, ``\\r``, ``\\x00``): one record is one line
  but for its traceback;
- ``json``: one JSON object per line, ``{"at", "level", "logger", "pid", "message", …every
  structured field…, "requestId"?, "exception"?}``.

``at`` is the record's instant in UTC to the millisecond (``2026-12-01T20:40:53.123Z``).
The structured fields are whatever the call passed as ``extra`` (``action``, ``loop``,
``eventId``, ``run``, …): nothing is dropped. A field that is not JSON is written as its
``str``. The request id is the one ``factory_site.requests`` gives the request (and echoes as
``X-Request-Id``): Django's own lines take it from the request they name, gunicorn's access
line from that response header.

This module does not need Django's apps: gunicorn loads ``GunicornLogger`` before the
application.
"""

import json
import logging
import os
import time
import traceback
from datetime import UTC, datetime

from gunicorn.glogging import Logger

from .requests import REQUEST_ID_HEADER, current_request_id

FORMATS = ("text", "json")
#: A LogRecord's own attributes: everything else on a record came from ``extra``.
RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def instant(record: logging.LogRecord) -> str:
    """The record's creation instant, UTC, milliseconds, ``Z``."""
    return _instant(record.created)


def _instant(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def structured_fields(record: logging.LogRecord) -> dict:
    """The record's ``extra`` fields in the order they were given, the request id last."""
    fields = {key: value for key, value in vars(record).items() if key not in RECORD_ATTRIBUTES}
    # Django logs a 4xx/5xx answer (django.request) after the middleware has returned, with
    # the request itself as a field: its id is on it.
    request_id = (
        fields.pop("requestId", None) or current_request_id() or getattr(fields.get("request"), "request_id", None)
    )
    if request_id:
        fields["requestId"] = request_id
    return fields


#: Values that ``json.dumps`` always writes: taken as they are, without a trial encoding.
_JSON_SCALARS = (str, int, float, bool, type(None))


def _json_value(value):
    if type(value) in _JSON_SCALARS:
        return value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


#: The characters that make a text value be written as a JSON string: JSON escapes the controls.
_QUOTED = frozenset(' "=' + "".join(map(chr, range(0x20))))
#: How a text line writes the controls of a message (all of C0 but the tab, and DEL): a message
#: can carry what a client sent — gunicorn's access line holds the decoded request path — and a
#: raw line break there would write a forged line of its own, a NUL a binary log.
_MESSAGE_ESCAPES = str.maketrans(
    {**{chr(code): f"\\x{code:02x}" for code in (*range(0x20), 0x7F) if code != 0x09}, "\n": "\\n", "\r": "\\r"}
)


def _text_value(value) -> str:
    if type(value) is int:  # what json.dumps writes (int.__repr__), without its encoder's set-up
        return str(value)
    value = _json_value(value)
    text = value if isinstance(value, str) else json.dumps(value)
    if text == "" or not _QUOTED.isdisjoint(text):
        return json.dumps(text)
    return text


class TextFormatter(logging.Formatter):
    """``<at> <LEVEL> <logger>[<pid>] <message> key=value … [traceback] requestId=<id>``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = structured_fields(record)
        request_id = fields.pop("requestId", None)
        line = self.head(record.created, record.levelname, record.name, record.process, record.getMessage(), fields)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            line += "\n" + record.exc_text
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return f"{line} requestId={request_id}" if request_id else line

    @staticmethod
    def head(created: float, level: str, logger: str, pid: int, message: str, fields: dict) -> str:
        """The line up to its traceback: instant, level, logger and pid, the message, the fields
        (``fields`` without the request id)."""
        line = f"{_instant(created)} {level} {logger}[{pid}] {message.translate(_MESSAGE_ESCAPES)}"
        return line + "".join(f" {key}={_text_value(value)}" for key, value in fields.items())

    def line(self, created: float, level: str, logger: str, pid: int, message: str, fields: dict) -> str:
        """The line ``format`` writes for a record with these attributes and ``extra`` fields
        and no exception (``GunicornLogger.access`` writes it without a record)."""
        fields = dict(fields)
        request_id = fields.pop("requestId", None)
        line = self.head(created, level, logger, pid, message, fields)
        return f"{line} requestId={request_id}" if request_id else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module's docstring for its keys)."""

    def format(self, record: logging.LogRecord) -> str:
        document = self.document(record.created, record.levelname, record.name, record.process, record.getMessage(),
                                 structured_fields(record))
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, ensure_ascii=False)

    @staticmethod
    def document(created: float, level: str, logger: str, pid: int, message: str, fields: dict) -> dict:
        document = {"at": _instant(created), "level": level, "logger": logger, "pid": pid, "message": message}
        for key, value in fields.items():
            document.setdefault(key, _json_value(value))
        return document

    def line(self, created: float, level: str, logger: str, pid: int, message: str, fields: dict) -> str:
        """The line ``format`` writes for a record with these attributes and ``extra`` fields
        and no exception (``GunicornLogger.access`` writes it without a record)."""
        return json.dumps(self.document(created, level, logger, pid, message, fields), ensure_ascii=False)


class RefusalWithoutTraceback(logging.Filter):
    """Drops the traceback Django attaches to its "Forbidden (Permission denied)" line: a refused
    request (a forged POST, a viewer's decision URL) is an expected answer, and its one line says
    which path and person; a 20-line traceback made it read as a crash. The record is kept.

    Django's ``django.security.*`` lines (a ``Host`` this server does not serve, answered 400) are
    a client's mistake, not the runtime's: they lose the traceback too and are written as
    WARNING, not ERROR, so that a scanner probing the port does not look like a failing runtime.
    (They are not mailed to ``DJANGO_ADMINS`` either: settings.LOGGING keeps that logger from
    Django's ``mail_admins``.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "django.request" and getattr(record, "status_code", None) == 403:
            record.exc_info, record.exc_text = None, None
        elif record.name.startswith("django.security.") and getattr(record, "status_code", None) == 400:
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def formatter_for(name: str) -> logging.Formatter:
    """The formatter of ``FACTORY_LOG_FORMAT`` ``name``; ValueError for any other name."""
    if name == "text":
        return TextFormatter()
    if name == "json":
        return JsonFormatter()
    raise ValueError(f"FACTORY_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {name!r}")


class GunicornLogger(Logger):
    """gunicorn's logger writing through the runtime's formatter (``--logger-class``).

    Its error log keeps gunicorn's messages; its access log is one record per answer,
    message ``<METHOD> <path> <status>`` with the fields ``remote``, ``method``, ``path``,
    ``query``, ``status``, ``bytes``, ``durationMs``, ``userAgent`` and ``requestId`` (the
    answer's ``X-Request-Id``).
    """

    def setup(self, cfg):
        super().setup(cfg)
        formatter = formatter_for(log_format_setting())
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(formatter)

    def access(self, resp, req, environ, request_time):
        if not self.access_log_enabled:
            return
        headers = {name.lower(): value for name, value in resp.headers}
        status = resp.status.split(None, 1)[0] if isinstance(resp.status, str) else resp.status
        method, path = environ.get("REQUEST_METHOD", "-"), environ.get("PATH_INFO", "-")
        fields = {
            "remote": environ.get("REMOTE_ADDR", "-"),
            "method": method,
            "path": path,
            "query": environ.get("QUERY_STRING", ""),
            "status": int(status),
            "bytes": getattr(resp, "sent", None) or 0,
            "durationMs": round(request_time.total_seconds() * 1000, 1),
            "userAgent": environ.get("HTTP_USER_AGENT", ""),
        }
        request_id = headers.get(REQUEST_ID_HEADER.lower())
        if request_id:
            fields["requestId"] = request_id
        handler = direct_handler(self.access_log)
        if handler is None:
            self.access_log.info("%s %s %s", method, path, status, extra=fields)
            return
        # The line the handler's formatter would write for that record, written as the
        # handler would write it, without a LogRecord and the logging machinery's walk
        # (docs/performance.md, "Signed intake").
        line = handler.formatter.line(
            time.time(), "INFO", self.access_log.name, os.getpid(), f"{method} {path} {status}", fields
        )
        handler.acquire()
        try:
            handler.stream.write(line + handler.terminator)
            handler.stream.flush()
        except Exception:  # as StreamHandler.emit: a log that cannot be written never fails the answer
            self.error(traceback.format_exc())
        finally:
            handler.release()


#: The ``emit`` of a handler that writes the formatted line and its terminator to its stream, then flushes.
_PLAIN_EMITS = (logging.StreamHandler.emit, logging.FileHandler.emit)


def direct_handler(log) -> logging.StreamHandler | None:
    """The one handler of ``log`` when an INFO record would go to it alone, unfiltered, as
    ``TextFormatter`` or ``JsonFormatter`` writes it, by ``StreamHandler.emit`` (a stream or a
    file already open); else None: the record goes through ``logging``."""
    if not isinstance(log, logging.Logger) or log.propagate or log.filters or not log.isEnabledFor(logging.INFO):
        return None
    if len(log.handlers) != 1:
        return None
    handler = log.handlers[0]
    if (type(handler).emit not in _PLAIN_EMITS or handler.filters or handler.level > logging.INFO
            or getattr(handler, "stream", None) is None
            or type(handler.formatter) not in (TextFormatter, JsonFormatter)):
        return None
    return handler


def log_format_setting() -> str:
    """``settings.FACTORY_LOG_FORMAT`` (gunicorn's master reads it before the app is loaded)."""
    from django.conf import settings

    return settings.FACTORY_LOG_FORMAT
