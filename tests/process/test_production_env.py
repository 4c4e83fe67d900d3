"""The documented production environment (config/production.env.example, docs/production.md).

``check --deploy`` is clean under it; ``runserve`` under it redirects plain HTTP to https
except for the loopback callers (the bridge's ``/events``, a monitor's ``/status`` and
``/metrics``), serves collected static files with long caching, and writes every line of
every child as JSON.
"""

import json
import re
import urllib.error
import urllib.request

import pytest

from tests.conftest import PROJECT_DIR
from tests.processes import free_port, stop, wait_until_listening

pytestmark = [pytest.mark.process, pytest.mark.django_db]

PRODUCTION_ENV = PROJECT_DIR / "config" / "production.env.example"
CLOCKS = (PROJECT_DIR / "config" / "factory-clocks.example.yaml").read_text()
SECRET = "production-events-secret-0123456789"
TOKEN = "production-api-token-0123456789abcdef"


def documented_env() -> dict:
    """The file's settings, without the ones it leaves empty for the operator to fill."""
    pairs = (line.split("=", 1) for line in PRODUCTION_ENV.read_text().splitlines()
             if line and not line.startswith("#"))
    return {key: value for key, value in pairs if value}


@pytest.fixture
def production(runtime, tmp_path):
    """The runtime's own database and directories under the documented production settings."""
    return {
        **documented_env(),
        "DATABASE_URL": runtime.env["DATABASE_URL"],
        "FACTORY_VAR_DIR": str(tmp_path / "var"),
        "FACTORY_CONFIG_DIR": str(runtime.config_dir),
        "FACTORY_ROOT": str(PROJECT_DIR / "examples" / "factory"),
        "FACTORY_EVENTS_SECRET": SECRET,
        "FACTORY_API_TOKEN": TOKEN,
    }


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(url: str, **headers):
    """``(status, headers, body)`` of a GET, redirects not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_check_deploy_is_clean_under_the_documented_production_env(runtime, production):
    result = runtime.manage("check", "--deploy", check=False, **production)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "System check identified no issues (0 silenced).\n")


def test_the_laptop_default_still_warns_about_https(runtime):
    result = runtime.manage("check", "--deploy", check=False)
    assert re.findall(r"security\.W\d+", result.stderr) == ["security.W004", "security.W008", "security.W012",
                                                            "security.W016"]


def test_runserve_under_the_production_env(runtime, production):
    runtime.write_config("schedule.yaml", CLOCKS)
    collected = runtime.manage("collectstatic", "--no-input", "-v", "0", **production)
    assert collected.returncode == 0, collected.stderr
    port = free_port()
    served = runtime.start("runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "2", "--run-workers", "0",
                           **production)
    wait_until_listening(port, served)
    url = f"http://127.0.0.1:{port}"

    bridge = runtime.manage("bridge", "run", "factory-triage", check=False, **{**production, "FACTORY_SERVE_URL": url})
    assert bridge.returncode == 0, bridge.stderr
    assert bridge.stdout.startswith("admitted: bridge:factory-triage:")
    assert all(json.loads(line)["logger"] for line in bridge.stderr.splitlines())

    status, headers, body = get(f"{url}/status", Authorization=f"Bearer {TOKEN}", **{"X-Request-Id": "monitor-1"})
    assert (status, headers["X-Request-Id"]) == (200, "monitor-1")
    status, _, body = get(f"{url}/metrics", Authorization=f"Bearer {TOKEN}")
    assert status == 200
    assert 'factory_intake_answers_total{door="events",status="202"} 1.0' in body.decode().splitlines()

    status, _, _ = get(f"{url}/no-such-page", **{"X-Forwarded-Proto": "https", "X-Request-Id": "lost-1"})
    assert status == 404
    status, headers, _ = get(f"{url}/admin/login/")
    assert (status, headers["Location"]) == (301, f"https://127.0.0.1:{port}/admin/login/")
    status, headers, _ = get(f"{url}/admin/login/", **{"X-Forwarded-Proto": "https"})
    assert status == 200
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    manifest = json.loads((PROJECT_DIR / production["FACTORY_VAR_DIR"] / "static" / "staticfiles.json").read_text())
    hashed = manifest["paths"]["admin/css/base.css"]
    status, headers, _ = get(f"{url}/static/{hashed}", **{"X-Forwarded-Proto": "https", "Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert headers["Cache-Control"] == "max-age=315360000, public, immutable"

    code, output = stop(served)
    assert code == 0, output
    documents = [json.loads(line) for line in output.splitlines()]
    assert {document["logger"] for document in documents} >= {"gunicorn.error", "gunicorn.access", "ops.runserve"}
    supervisor = [(d["level"], d["action"]) for d in documents if d["logger"] == "ops.runserve"]
    assert supervisor == [
        ("WARNING", "operator_created"), ("INFO", "registry_loaded"), ("INFO", "runtime_serving"), ("INFO", "runtime_stopped"),
    ]
    (serving,) = [d for d in documents if d.get("action") == "runtime_serving"]
    assert (serving["bind"], serving["message"].split(" (")[0]) == (f"127.0.0.1:{port}", f"serving on {url}/")
    # wait_until_listening's own GETs of /status (401, no token) are there too.
    (access,) = [d for d in documents if d["logger"] == "gunicorn.access" and d.get("requestId") == "monitor-1"]
    assert (access["method"], access["status"], access["requestId"], access["message"]) == (
        "GET", 200, "monitor-1", "GET /status 200",
    )
    (warning,) = [d for d in documents if d["logger"] == "django.request" and d.get("requestId") == "lost-1"]
    assert (warning["level"], warning["message"], warning["status_code"], warning["requestId"]) == (
        "WARNING", "Not Found: /no-such-page", 404, "lost-1",
    )
    (lost,) = [d for d in documents if d["logger"] == "gunicorn.access" and d["path"] == "/no-such-page"]
    assert (lost["status"], lost["requestId"]) == (404, "lost-1")
