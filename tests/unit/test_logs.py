"""The one log format (factory_site.logs): text by default, JSON lines on request, every field kept."""

import io
import json
import logging
import sys
from datetime import timedelta
from types import SimpleNamespace

import pytest

from factory_site import logs, requests

CREATED = 1764536403.25  # 2025-11-30T21:00:03.250Z


def record(message="loop %s fired", args=("reaper",), exc_info=None, **extra) -> logging.LogRecord:
    made = logging.getLogger("schedules.ticks").makeRecord(
        "schedules.ticks", logging.INFO, __file__, 1, message, args, exc_info, extra=extra or None,
    )
    made.created, made.process = CREATED, 4242
    return made


@pytest.fixture
def serving():
    token = requests._request_id.set("req-7")
    yield
    requests._request_id.reset(token)


def test_text_keeps_every_field_in_order():
    line = logs.TextFormatter().format(record(action="tick_admitted", loop="reaper", skippedSlots=0))
    assert line == (
        "2025-11-30T21:00:03.250Z INFO schedules.ticks[4242] loop reaper fired "
        "action=tick_admitted loop=reaper skippedSlots=0"
    )


def test_text_quotes_values_with_spaces_and_writes_structures_as_json():
    line = logs.TextFormatter().format(record(reason="two words", data={"a": 1}, empty=""))
    assert line.endswith(' reason="two words" data="{\\"a\\": 1}" empty=""')


def test_text_writes_each_kind_of_scalar_as_json_writes_it():
    line = logs.TextFormatter().format(record(
        count=3, ms=1.5, ok=True, none=None, nan=float("nan"), tab="a\tb", eq="k=v", quote='say "hi"', path="/events"))
    assert line.endswith(
        ' count=3 ms=1.5 ok=true none=null nan=NaN tab="a\\tb" eq="k=v" quote="say \\"hi\\"" path=/events')


def test_text_writes_a_message_s_control_characters_as_escapes_so_no_line_can_be_forged():
    # gunicorn's access line carries the decoded path: /x%0A2026-…%20ERROR%20forged… and %00.
    line = logs.TextFormatter().format(record(
        "%s %s %s", ("GET", "/x\n2026-12-04T20:00:00.000Z ERROR forged.logger[1] FORGED\r\x00\x7f\tend", 404),
        path="/x\n\x00"))
    assert line == (
        "2025-11-30T21:00:03.250Z INFO schedules.ticks[4242] GET "
        "/x\\n2026-12-04T20:00:00.000Z ERROR forged.logger[1] FORGED\\r\\x00\\x7f\tend 404 "
        'path="/x\\n\\u0000"'
    )
    assert len(line.splitlines()) == 1


def test_text_ends_with_the_request_id_while_serving(serving):
    line = logs.TextFormatter().format(record(action="x"))
    assert line.endswith(" action=x requestId=req-7")


def test_json_is_one_object_with_every_field(serving):
    document = json.loads(logs.JsonFormatter().format(record(action="tick_admitted", loop="reaper", eventId="e-1")))
    assert document == {
        "at": "2025-11-30T21:00:03.250Z", "level": "INFO", "logger": "schedules.ticks", "pid": 4242,
        "message": "loop reaper fired", "action": "tick_admitted", "loop": "reaper", "eventId": "e-1",
        "requestId": "req-7",
    }


def test_json_writes_what_is_not_json_as_text_and_the_traceback_as_exception():
    try:
        raise ValueError("boom")
    except ValueError:
        made = record(exc_info=sys.exc_info(), when=timedelta(seconds=2))
    text = logs.JsonFormatter().format(made)
    assert "\n" not in text
    document = json.loads(text)
    assert document["when"] == "0:00:02"
    assert document["exception"].startswith("Traceback") and document["exception"].endswith("ValueError: boom")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="FACTORY_LOG_FORMAT must be one of text, json, not 'xml'"):
        logs.formatter_for("xml")


def test_gunicorns_access_line_carries_the_answers_request_id(monkeypatch):
    logger = logs.GunicornLogger.__new__(logs.GunicornLogger)
    captured = []
    logger.access_log = SimpleNamespace(info=lambda *args, **kwargs: captured.append((args, kwargs)))
    logger._access_log_enabled = True
    response = SimpleNamespace(status="200 OK", headers=[("Content-Type", "text/plain"), ("X-Request-Id", "r-1")],
                               sent=12)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/status", "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1",
               "HTTP_USER_AGENT": "probe"}
    logger.access(response, None, environ, timedelta(milliseconds=4.5))
    assert captured == [(("%s %s %s", "GET", "/status", "200"), {"extra": {
        "remote": "127.0.0.1", "method": "GET", "path": "/status", "query": "", "status": 200, "bytes": 12,
        "durationMs": 4.5, "userAgent": "probe", "requestId": "r-1",
    }})]


def forbidden(name="django.request", status_code=403) -> logging.LogRecord:
    try:
        raise PermissionError("victor lacks the control_loop permission")
    except PermissionError:
        exc_info = sys.exc_info()
    made = logging.getLogger(name).makeRecord(name, logging.WARNING, __file__, 1, "Forbidden (Permission denied): %s",
                                              ("/dashboard/pause/",), exc_info, extra={"status_code": status_code})
    made.created, made.process = CREATED, 4242
    return made


def test_a_refused_request_is_one_line_without_its_traceback():
    line = forbidden()
    assert logs.RefusalWithoutTraceback().filter(line) is True
    assert logs.TextFormatter().format(line) == (
        "2025-11-30T21:00:03.250Z WARNING django.request[4242] Forbidden (Permission denied): /dashboard/pause/ status_code=403")


@pytest.mark.parametrize(("name", "status_code"), [("django.request", 500), ("ops.web", 403)])
def test_any_other_record_keeps_its_traceback(name, status_code):
    line = forbidden(name, status_code)
    assert logs.RefusalWithoutTraceback().filter(line) is True
    assert "Traceback (most recent call last)" in logs.TextFormatter().format(line)


def test_a_host_this_server_does_not_serve_is_a_warning_of_one_line():
    try:
        raise ValueError("Invalid HTTP_HOST header: 'evil.example'.")
    except ValueError:
        exc_info = sys.exc_info()
    name = "django.security.DisallowedHost"
    line = logging.getLogger(name).makeRecord(name, logging.ERROR, __file__, 1, "Invalid HTTP_HOST header: %s", ("'evil.example'",),
                                              exc_info, extra={"status_code": 400})
    line.created, line.process = CREATED, 4242
    assert logs.RefusalWithoutTraceback().filter(line) is True
    assert logs.TextFormatter().format(line) == (
        "2025-11-30T21:00:03.250Z WARNING django.security.DisallowedHost[4242] Invalid HTTP_HOST header: 'evil.example' "
        "status_code=400")


def test_the_console_handler_drops_refusals_tracebacks():
    from django.conf import settings

    assert settings.LOGGING["handlers"]["console"]["filters"] == ["refusal_without_traceback"]
    assert settings.LOGGING["filters"]["refusal_without_traceback"] == {"()": "factory_site.logs.RefusalWithoutTraceback"}


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_access_line_written_directly_is_the_line_logging_writes(monkeypatch, tmp_path, log_format):
    """gunicorn's access line skips the LogRecord and the logging machinery (docs/performance.md,
    "Signed intake"): the same handler, the same bytes as the record through ``logging`` would give."""
    from gunicorn.config import Config

    monkeypatch.setattr(logs, "log_format_setting", lambda: log_format)
    monkeypatch.setattr(logs.time, "time", lambda: 1796000000.1234)
    access_log = logging.getLogger("gunicorn.access")  # gunicorn's, shared by every GunicornLogger
    monkeypatch.setattr(access_log, "handlers", [])
    monkeypatch.setattr(access_log, "filters", [])
    cfg = Config()
    cfg.set("accesslog", str(tmp_path / "access.log"))
    logger = logs.GunicornLogger(cfg)
    response = SimpleNamespace(status="202 Accepted", headers=[("Allow", "POST"), ("X-Request-Id", "r-1")], sent=70)
    try:
        _compare_access_lines(logger, response, tmp_path)
    finally:
        for handler in access_log.handlers:
            handler.close()


def _compare_access_lines(logger, response, tmp_path):
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/events\n2026 ERROR forged", "QUERY_STRING": "a=b c",
               "REMOTE_ADDR": "127.0.0.1", "HTTP_USER_AGENT": "probe 1.0"}
    assert logs.direct_handler(logger.access_log) is logger.access_log.handlers[0]
    logger.access(response, None, environ, timedelta(milliseconds=4.5))
    direct = (tmp_path / "access.log").read_text()
    # The same answer through logging: a filter on the logger turns the direct way off.
    logger.access_log.addFilter(lambda record: setattr(record, "created", 1796000000.1234) or True)
    assert logs.direct_handler(logger.access_log) is None
    logger.access(response, None, environ, timedelta(milliseconds=4.5))
    first, second = (tmp_path / "access.log").read_text().splitlines()
    assert direct == first + "\n"
    assert first == second
    assert "\\n2026 ERROR forged" in first and first.count("\n") == 0


def test_the_access_line_goes_through_logging_when_the_handler_is_not_plain(monkeypatch):
    import logging.handlers

    log = logging.getLogger("test.access.direct")
    log.propagate = False
    handler = logging.handlers.MemoryHandler(10)
    handler.setFormatter(logs.TextFormatter())
    log.addHandler(handler)
    try:
        assert logs.direct_handler(log) is None  # not StreamHandler's emit
        log.removeHandler(handler)
        stream_handler = logging.StreamHandler(io.StringIO())
        stream_handler.setFormatter(logging.Formatter())
        log.addHandler(stream_handler)
        assert logs.direct_handler(log) is None  # not the runtime's formatter
        stream_handler.setFormatter(logs.JsonFormatter())
        assert logs.direct_handler(log) is stream_handler
        log.propagate = True
        assert logs.direct_handler(log) is None  # its parents' handlers would get it too
    finally:
        log.handlers.clear()
