"""The floor of ``bench/intake_bench.py``: what Django and gunicorn answer at all for a signed ``POST /events``.

Not a test, and not the runtime. A minimal Django project in this one module — no apps, no
middleware, no database, no templates — whose one view does what the door does before it
writes anything, with the door's own functions: reads the body (``intake.bodies.read_body``,
1 MiB cap), checks the same HMAC-SHA256 signature over ``"<timestamp>.<body>"`` within the
same ±300 s window (``intake.signatures.verify_factory_signature``, against the host's clock:
no database to read one from), checks the content type and parses the JSON strictly
(``lib.json_text.decode_json``), then answers 202 with the door's body shape and a
``Content-Length``. A refusal is answered in the doors' shapes, so a wrong secret shows up
as 401s in the bench's status column, never as a fast floor.

Served as ``runserve`` serves the doors: gunicorn's ``gthread`` worker, ``--workers``
processes (default 2) of ``--threads`` (default 16, ``runserve.HTTP_THREADS``) threads, the
app preloaded, no access log. The worker is stock ``gthread`` but for one thing it shares
with ``runserve``'s worker: **a new connection goes to the worker holding fewest**
(``factory_site.connection_shares``, the same accept turn). Without it the 32 kept-alive
connections of a run split as the kernel happens to wake the workers — all 32 on one worker
was seen — and the floor moved between 2,800 and 4,300 answers/s from run to run on that
alone. The runtime's read deadline, JSON error pages and process row are not the floor's.

    FLOOR_EVENTS_SECRET=S .venv/bin/python bench/floor_app.py --bind 127.0.0.1:PORT [--workers 2] [--threads 16]
"""

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

#: The environment variable holding the secret the floor checks signatures under.
SECRET_VARIABLE = "FLOOR_EVENTS_SECRET"
#: ``runserve``'s threads per HTTP worker (ops/management/commands/runserve.py, ``HTTP_THREADS``).
THREADS = 16


def _configure() -> None:
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        DEBUG=False,
        SECRET_KEY="floor-app-secret-key",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        DATABASES={},
        USE_TZ=True,
        LOGGING_CONFIG=None,
    )


_configure()

import django  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402

from intake.bodies import EVENTS_MAX_BODY_BYTES, JSON_CONTENT_TYPE, read_body, require_media_type  # noqa: E402
from intake.signatures import verify_factory_signature  # noqa: E402
from lib.json_text import decode_json  # noqa: E402
from lib.refusals import Refused  # noqa: E402

django.setup()

SECRET = os.environ.get(SECRET_VARIABLE, "")


def _json(status: int, document: dict) -> HttpResponse:
    body = json.dumps(document, separators=(",", ":")).encode()
    response = HttpResponse(body, status=status, content_type="application/json")
    response["Content-Length"] = str(len(body))
    return response


@csrf_exempt
def events(request: HttpRequest) -> HttpResponse:
    """Body, signature, content type, JSON — the door's checks in the door's order — then 202."""
    if request.method != "POST":
        return _json(405, {"error": "method_not_allowed", "detail": f'Method "{request.method}" not allowed.'})
    try:
        body = read_body(request, EVENTS_MAX_BODY_BYTES)
        verify_factory_signature(
            SECRET,
            timestamp=request.headers.get("X-Factory-Timestamp"),
            signature=request.headers.get("X-Factory-Signature"),
            body=body,
            now=datetime.now(UTC),
        )
        require_media_type(request, (JSON_CONTENT_TYPE,))
        envelope = decode_json(body)
    except Refused as exc:
        if exc.status == 422:
            return _json(422, {"errors": exc.as_errors()})
        return _json(exc.status, {"error": exc.code, "detail": exc.detail})
    event_id = envelope.get("eventId") if isinstance(envelope, dict) else None
    return _json(202, {"admitted": True, "duplicate": False, "eventId": event_id})


urlpatterns = [path("events", events)]

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()


from gunicorn.workers.gthread import ThreadWorker  # noqa: E402

from factory_site.connection_shares import BalancedAccept  # noqa: E402


class BalancedThreadWorker(BalancedAccept, ThreadWorker):
    """gthread whose accept leaves a new connection to a worker holding fewer, as
    ``factory_site.http_worker.ReadDeadlineThreadWorker`` does."""

    def init_process(self):
        self.serve_sharing(super().init_process)

    def accept(self, listener):
        if self.may_accept():
            super().accept(listener)


def gunicorn_argv(bind: str, workers: int, threads: int) -> list[str]:
    """The gunicorn command line serving this module, as ``runserve`` serves the runtime (less
    its worker class and access log)."""
    return [
        sys.executable, "-m", "gunicorn", "floor_app:application",
        "--chdir", str(Path(__file__).resolve().parent),
        "--bind", bind,
        "--workers", str(workers),
        "--worker-class", "floor_app.BalancedThreadWorker",
        "--threads", str(threads),
        "--preload",
        "--graceful-timeout", "10",
        "--no-control-socket",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:7599")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=THREADS)
    args = parser.parse_args(argv)
    if not SECRET:
        raise SystemExit(f"{SECRET_VARIABLE} is not set: every request would be 401 route_disabled")
    command = gunicorn_argv(args.bind, args.workers, args.threads)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
