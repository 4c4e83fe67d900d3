"""The alerts list says whether anyone is told, and what an empty list means (docs/notifications.md)."""

import pytest
from django.utils.html import escape

from ops.admin import NO_ALERT

pytestmark = pytest.mark.django_db


def test_with_no_channel_the_alerts_say_notifications_are_off(admin_client, settings):
    settings.FACTORY_NOTIFY_EMAIL_TO, settings.FACTORY_NOTIFY_WEBHOOK_URL = [], ""
    body = admin_client.get("/admin/ops/alert/").content.decode()
    assert (
        '<p class="alerts-channels" id="alerts-channels">Notifications are off: no channel is configured, so no alert'
        " is raised or sent. Set FACTORY_NOTIFY_EMAIL_TO or FACTORY_NOTIFY_WEBHOOK_URL to be told"
        " (docs/notifications.md).</p>"
    ) in body
    assert '<p class="alerts-empty" id="alerts-empty">No alert: notifications are off (above).</p>' in body


def test_with_channels_the_alerts_say_where_they_go_and_what_would_be_listed(admin_client, settings):
    settings.FACTORY_NOTIFY_EMAIL_TO = ["ops@example.com", "lead@example.com"]
    settings.FACTORY_NOTIFY_WEBHOOK_URL, settings.FACTORY_NOTIFY_SECRET = "https://hooks.example.com/f", "s" * 32
    body = admin_client.get("/admin/ops/alert/").content.decode()
    assert (
        '<p class="alerts-channels" id="alerts-channels">Notifications are on: each alert is sent when raised and when'
        " cleared, by e-mail to ops@example.com, lead@example.com and to the webhook.</p>"
    ) in body
    assert f'<p class="alerts-empty" id="alerts-empty">{escape(NO_ALERT)}</p>' in body
