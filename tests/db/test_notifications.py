"""Notifications (docs/notifications.md): raised and cleared once each, by e-mail (Django's locmem
backend here) and a signed webhook (a loopback receiver), sent outside the deciding transaction,
retried with back-off, journaled; off unless configured."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core import mail
from django.core.checks import run_checks
from django.core.management import call_command

from lib.signing import sign
from ops.models import Alert, Notification
from ops.notify import raise_and_clear
from ops.notify_send import send_one
from runtime.models import JournalEntry, Proposal
from runtime.services.approval import reject_proposal
from tests.conftest import at
from tests.helpers import tick
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "notify-test-secret"
WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
LATER = at("2026-11-30T23:00:00Z")


@pytest.fixture
def receiver():
    running = Receiver()
    yield running
    running.close()


@pytest.fixture
def configured(settings, receiver, registry_files):
    settings.FACTORY_NOTIFY_EMAIL_TO = ["ops@example.org"]
    settings.FACTORY_NOTIFY_WEBHOOK_URL = receiver.url
    settings.FACTORY_NOTIFY_SECRET = SECRET
    settings.FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS = 3600
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    return receiver


def waiting_alerts() -> list[str]:
    return sorted(Alert.objects.filter(key__startswith="proposalsWaiting:").values_list("key", flat=True))


def test_nothing_is_written_unless_configured(registry_files):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    assert raise_and_clear(now=LATER) == (0, 0)
    assert (Alert.objects.count(), Notification.objects.count()) == (0, 0)


def test_a_waiting_proposal_is_raised_once_per_channel(configured):
    raise_and_clear(now=at("2026-11-30T21:30:00Z"))
    assert waiting_alerts() == []  # half an hour: not waited long enough
    raise_and_clear(now=LATER)
    alert = Alert.objects.get(key="proposalsWaiting:reaper")
    proposal = Proposal.objects.get()
    assert alert.detail == {"loop": "reaper", "pending": 1, "oldestProposalId": proposal.pk,
                            "waitingSince": "2026-11-30T21:00:10Z", "newestProposalId": proposal.pk,
                            "preview": {"status": "pending", "summary": None}}
    assert sorted(alert.notifications.values_list("kind", "channel")) == [("raised", "email"), ("raised", "webhook")]
    raise_and_clear(now=LATER + timedelta(minutes=1))
    assert Notification.objects.filter(alert__key="proposalsWaiting:reaper").count() == 2
    assert JournalEntry.objects.filter(action="alert_raised", data__alert="proposalsWaiting:reaper").count() == 1


def test_the_webhook_is_signed_and_the_mail_sent(configured):
    raise_and_clear(now=LATER)
    Notification.objects.exclude(alert__key="proposalsWaiting:reaper").delete()
    while send_one(now=LATER):
        pass
    headers, body = configured.requests[0]
    assert headers["X-Factory-Signature"] == sign(SECRET, headers["X-Factory-Timestamp"].encode() + b"." + body)
    assert headers["X-Factory-Timestamp"] == str(int(LATER.timestamp()))
    message = json.loads(body)
    assert {k: message[k] for k in ("schemaVersion", "alert", "state", "at")} == {
        "schemaVersion": "factory.notification/v1", "alert": "proposalsWaiting:reaper", "state": "raised",
        "at": "2026-11-30T23:00:00Z"}
    assert [m.subject for m in mail.outbox] == ["[factory] proposalsWaiting:reaper raised"]
    assert mail.outbox[0].to == ["ops@example.org"]
    assert set(Notification.objects.values_list("status", flat=True)) == {"sent"}
    sent = JournalEntry.objects.filter(action="notification_sent").order_by("id")
    assert [(e.actor, e.data["channel"], e.data["attempt"]) for e in sent] == [
        ("system", "email", 1), ("system", "webhook", 1)]


def test_a_decided_proposal_clears_its_alert_once(configured, approver):
    raise_and_clear(now=LATER)
    reject_proposal(Proposal.objects.get().pk, user=approver, now=LATER)
    raised, cleared = raise_and_clear(now=LATER + timedelta(seconds=15))
    alert = Alert.objects.get(key="proposalsWaiting:reaper")
    assert (cleared >= 1, alert.cleared_at) == (True, LATER + timedelta(seconds=15))
    assert sorted(alert.notifications.values_list("kind", "channel")) == [
        ("cleared", "email"), ("cleared", "webhook"), ("raised", "email"), ("raised", "webhook")]
    raise_and_clear(now=LATER + timedelta(seconds=30))
    assert alert.notifications.count() == 4


def test_a_failing_webhook_is_retried_with_back_off_then_given_up(configured, settings):
    settings.FACTORY_NOTIFY_EMAIL_TO = []
    settings.FACTORY_NOTIFY_MAX_ATTEMPTS = 3
    configured.status = 503
    raise_and_clear(now=LATER)
    Notification.objects.exclude(alert__key="proposalsWaiting:reaper").delete()
    note = Notification.objects.get()
    assert send_one(now=LATER) is True
    note.refresh_from_db()
    assert (note.status, note.attempts, note.next_attempt_at, note.last_error) == (
        "pending", 1, LATER + timedelta(seconds=30), "webhook answered 503")
    assert send_one(now=LATER + timedelta(seconds=29)) is False  # not due yet
    assert send_one(now=LATER + timedelta(seconds=30)) is True
    note.refresh_from_db()
    assert (note.attempts, note.next_attempt_at) == (2, LATER + timedelta(seconds=90))
    assert send_one(now=LATER + timedelta(seconds=90)) is True
    note.refresh_from_db()
    assert (note.status, note.attempts) == ("failed", 3)
    assert [e.data["final"] for e in JournalEntry.objects.filter(action="notification_failed").order_by("id")] == [
        False, False, True]
    assert len(configured.requests) == 3


def test_an_unreachable_webhook_is_a_failed_attempt(configured, settings):
    settings.FACTORY_NOTIFY_EMAIL_TO = []
    configured.close()
    raise_and_clear(now=LATER)
    assert send_one(now=LATER) is True
    note = Notification.objects.filter(attempts=1).get()
    assert (note.status, note.last_error.startswith("webhook unreachable")) == ("pending", True)


def test_doctor_anomalies_are_alerts_too(configured):
    raise_and_clear(now=LATER)
    keys = set(Alert.objects.values_list("key", flat=True))
    assert "anomaly:slotLoopStale" in keys  # no slot loop has turned in this test
    assert Alert.objects.get(key="anomaly:slotLoopStale").detail["anomaly"] == "slotLoopStale"


@pytest.mark.parametrize("changes, expected", [
    ({"FACTORY_NOTIFY_SECRET": "same", "FACTORY_EVENTS_SECRET": "same"}, ["ops.E001"]),
    ({"FACTORY_NOTIFY_SECRET": "same", "FACTORY_GITHUB_WEBHOOK_SECRET": "same"}, ["ops.E001"]),
    ({"FACTORY_NOTIFY_WEBHOOK_URL": "http://127.0.0.1:9/x"}, ["ops.E002"]),
    ({"FACTORY_NOTIFY_WEBHOOK_URL": "ftp://x/y", "FACTORY_NOTIFY_SECRET": "s"}, ["ops.E003"]),
    ({"FACTORY_NOTIFY_MAX_ATTEMPTS": 0}, ["ops.E004"]),
])
def test_the_settings_are_checked(settings, changes, expected):
    for name, value in changes.items():
        setattr(settings, name, value)
    assert [e.id for e in run_checks() if e.id.startswith("ops.")] == expected


# Transactional: the loop closes a connection whose autocommit is off, as a test's transaction has it.
@pytest.mark.django_db(transaction=True)
def test_the_command_is_off_unless_configured_and_once_sends_what_is_due(registry_files, settings, receiver):
    out = StringIO()
    call_command("notify", "--once", stdout=out)
    assert out.getvalue().strip() == (
        "notifications are off: set FACTORY_NOTIFY_EMAIL_TO and/or FACTORY_NOTIFY_WEBHOOK_URL")
    settings.FACTORY_NOTIFY_WEBHOOK_URL = receiver.url
    settings.FACTORY_NOTIFY_SECRET = SECRET
    call_command("notify", "--once")
    assert Notification.objects.count() == len(receiver.requests) > 0
    assert set(Notification.objects.values_list("status", flat=True)) == {"sent"}


def test_the_admin_shows_alerts_and_notifications_read_only(client, configured, approver):
    raise_and_clear(now=LATER)
    client.force_login(approver)
    assert client.get("/admin/ops/alert/").status_code == 200
    page = client.get("/admin/ops/notification/")
    assert page.status_code == 200 and "proposalsWaiting:reaper" in page.content.decode()
    assert client.get("/admin/ops/notification/add/").status_code == 403


def test_a_waiting_proposals_alert_carries_its_previews_summary_never_its_output(configured):
    from runtime.preview_model import Preview

    proposal = Proposal.objects.get()
    Preview.objects.filter(proposal=proposal).update(
        status="done", outcome="WOULD_REAP", summary="1 stale claim(s) would be reaped",
        data={"stale": [{"ticket": "T-7"}]}, stdout="would reap T-7 (T-7.json)")
    raise_and_clear(now=LATER)
    detail = Alert.objects.get(key="proposalsWaiting:reaper").detail
    assert detail["preview"] == {"status": "done", "summary": "WOULD_REAP: 1 stale claim(s) would be reaped"}
    assert "T-7" not in json.dumps(detail)
