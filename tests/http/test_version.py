"""The product's version is one (factory_site.__version__), and every place that shows it shows
the same: ``runserve --version``, ``/status``, the OpenAPI document, ``/metrics`` and the admin."""

import re

import pytest
import yaml
from django.core.management import call_command
from prometheus_client.parser import text_string_to_metric_families

from factory_site import __version__

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

TOKEN = "a-long-random-api-token"


def test_the_version_is_semantic():
    assert re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", __version__)


def test_runserve_status_schema_and_metrics_report_the_same_version(client, settings, capsys, approver):
    settings.FACTORY_API_TOKEN = TOKEN
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with pytest.raises(SystemExit) as exited:
        call_command("runserve", "--version")
    assert (exited.value.code, capsys.readouterr().out) == (0, f"{__version__}\n")

    status = client.get("/status", headers=bearer).json()
    assert (list(status)[0], status["version"]) == ("version", __version__)

    client.force_login(approver)
    schema = yaml.safe_load(client.get("/api/schema/").content)
    assert schema["info"]["version"] == __version__

    text = client.get("/metrics", headers=bearer).content.decode()
    build = [(sample.labels, sample.value) for family in text_string_to_metric_families(text)
             for sample in family.samples if sample.name == "factory_build_info"]
    assert build == [({"version": __version__}, 1.0)]


def test_the_admin_footer_names_the_version(client, approver):
    client.force_login(approver)
    page = client.get("/admin/").content.decode()
    assert f'<div id="product-version">Factory event runtime {__version__}</div>' in page
