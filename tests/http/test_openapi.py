"""The OpenAPI description (docs/api.md): valid, every route in it, served at /api/schema/ and
browsable at /api/docs/ from the sidecar's static files, listing every status docs/intake.md lists."""

import re
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

from tests.conftest import PROJECT_DIR

pytestmark = pytest.mark.django_db

#: Routes that are not part of the description: the admin's pages, the description itself,
#: and the operator's HTML pages (ops/web_urls.py: /, the dashboard, a loop's page, the parts and
#: fragments the pages poll), which are for people in a browser, as the admin is (docs/web.md).
UNDESCRIBED = (
    "admin/", "api/schema/", "api/docs/", "api/^.*$", "", "dashboard/", "dashboard/table/", "loops/<str:name>/",
    "loops/<str:name>/live/", "live/runs/<int:run_id>/", "live/inbox/", "dashboard/pause/", "dashboard/resume/",
    "loops/<str:name>/trigger/", "me/",
)


def routes(patterns=None, prefix="") -> list[str]:
    found = []
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        text = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if not text.startswith("admin/"):
                found += routes(pattern.url_patterns, text)
        elif isinstance(pattern, URLPattern) and text not in UNDESCRIBED:
            found.append("/" + re.sub(r"<\w+:(\w+)>", r"{\1}", text))
    return found


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    out = StringIO()
    with django_db_blocker.unblock():
        call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    return yaml.safe_load(out.getvalue())


def test_the_description_validates_and_lists_every_route(schema):
    assert sorted(schema["paths"]) == sorted(routes())
    assert "/api/proposals/{id}/approve" in schema["paths"]
    assert {"/events", "/github", "/schedules", "/status", "/metrics"} <= set(schema["paths"])


def test_every_operation_has_an_id_a_summary_and_its_refusals(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation["operationId"] and operation["summary"], (path, method)
            assert {"405", "500"} <= set(operation["responses"]), (path, method)


def test_the_doors_list_every_status_docs_intake_lists(schema):
    text = (PROJECT_DIR / "docs" / "intake.md").read_text()
    table = text.split("## Every answer", 1)[1].split("401 `error` codes", 1)[0]
    documented = set(re.findall(r"^\| (\d{3}) \|", table, re.M))
    for door in ("/events", "/github"):
        assert set(schema["paths"][door]["post"]["responses"]) == documented, door
    signature_headers = {p["name"] for p in schema["paths"]["/events"]["post"]["parameters"]}
    assert signature_headers == {"X-Factory-Timestamp", "X-Factory-Signature"}
    assert {p["name"] for p in schema["paths"]["/github"]["post"]["parameters"]} == {
        "X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"}


def test_decisions_list_their_refusals(schema):
    approve = schema["paths"]["/api/proposals/{id}/approve"]["post"]["responses"]
    assert sorted(approve) == ["200", "400", "401", "403", "404", "405", "408", "409", "413", "415", "500"]
    assert "request_timeout" in approve["408"]["description"]
    assert "bad_request" in approve["400"]["description"]
    for code in ("not_pending", "previous_run_in_flight"):
        assert code in approve["409"]["description"]
    for code in ("permission_denied", "person_required", "csrf_failed"):
        assert code in approve["403"]["description"]


def test_the_schema_and_its_page_are_served_without_a_cdn(client):
    described = client.get("/api/schema/", headers={"Accept": "application/json"})
    assert described.status_code == 200
    assert "/api/proposals" in described.json()["paths"]
    page = client.get("/api/docs/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in body
    assert "cdn." not in body and "https://" not in body
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200
    asset.close()
