"""Sending notifications, one at a time, outside any transaction (docs/notifications.md).

``send_one`` claims the oldest due pending row (``select_for_update(skip_locked=True)`` in a
durable transaction) and pushes its next attempt back *before* sending, so a crash mid-send
retries it later rather than never; then sends with no transaction open, and records the
result (``notification_sent`` or ``notification_failed`` in the journal). A failed attempt
waits ``RETRY_BASE_SECONDS × 2^(attempt−1)``, at most ``RETRY_MAX_SECONDS``; after
``FACTORY_NOTIFY_MAX_ATTEMPTS`` the row is ``failed`` for good.

- ``email``: ``django.core.mail.send_mail`` (Django's ``EMAIL_*`` settings) to
  ``FACTORY_NOTIFY_EMAIL_TO``.
- ``webhook``: ``POST FACTORY_NOTIFY_WEBHOOK_URL`` with the message as JSON, signed like
  ``/events``: ``X-Factory-Timestamp`` (unix s) and ``X-Factory-Signature:
  sha256=HMAC(FACTORY_NOTIFY_SECRET, "<timestamp>.<body>")``; any 2xx is delivered.
"""

import json
import logging
import urllib.error
import urllib.request
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction

from lib.signing import sign
from ops.models import Notification, NotificationStatus
from runtime.models import Actor
from runtime.services.journal import record

logger = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 30
#: An hour: a receiver down for a day is tried about every hour, not every second.
RETRY_MAX_SECONDS = 3600
#: A webhook that has not answered in this many seconds failed this attempt.
WEBHOOK_TIMEOUT_SECONDS = 10


class DeliveryFailed(Exception):
    """An attempt that did not deliver; the text says why (kept as ``last_error``)."""


def retry_delay(attempt: int) -> timedelta:
    """The wait after failed attempt number ``attempt`` (from 1)."""
    return timedelta(seconds=min(RETRY_BASE_SECONDS * 2 ** (attempt - 1), RETRY_MAX_SECONDS))


def _subject(message: dict) -> str:
    return f"[factory] {message['alert']} {message['state']}"


def deliver(notification: Notification, *, now: datetime) -> None:
    """Send one notification on its channel; raises DeliveryFailed."""
    message = notification.message
    if notification.channel == "email":
        try:
            send_mail(_subject(message), json.dumps(message, indent=2), None, settings.FACTORY_NOTIFY_EMAIL_TO)
        except OSError as exc:  # SMTP errors are OSErrors (smtplib.SMTPException included)
            raise DeliveryFailed(f"e-mail: {exc}") from exc
        return
    body = json.dumps(message).encode("utf-8")
    timestamp = str(int(now.timestamp()))
    request = urllib.request.Request(settings.FACTORY_NOTIFY_WEBHOOK_URL, data=body, method="POST", headers={
        "Content-Type": "application/json",
        "X-Factory-Timestamp": timestamp,
        "X-Factory-Signature": sign(settings.FACTORY_NOTIFY_SECRET, timestamp.encode() + b"." + body),
    })
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"webhook answered {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryFailed(f"webhook unreachable: {exc}") from exc


def _claim(now: datetime) -> Notification | None:
    with transaction.atomic(durable=True):
        notification = (
            Notification.objects.select_for_update(skip_locked=True).select_related("alert")
            .filter(status=NotificationStatus.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at", "id")
            .first()
        )
        if notification is None:
            return None
        notification.attempts += 1
        notification.next_attempt_at = now + retry_delay(notification.attempts)
        notification.save(update_fields=["attempts", "next_attempt_at"])
    return notification


def send_one(*, now: datetime) -> bool:
    """Send the oldest due notification, if any; True when there was one (sent or not)."""
    notification = _claim(now)
    if notification is None:
        return False
    try:
        deliver(notification, now=now)
    except DeliveryFailed as exc:
        final = notification.attempts >= settings.FACTORY_NOTIFY_MAX_ATTEMPTS
        Notification.objects.filter(pk=notification.pk).update(
            last_error=str(exc)[:2000], status=NotificationStatus.FAILED if final else NotificationStatus.PENDING,
        )
        record("notification_failed", Actor.SYSTEM, at=now, data={
            "notification": notification.pk, "alert": notification.alert.key, "state": notification.kind,
            "channel": notification.channel, "attempt": notification.attempts, "final": final, "error": str(exc),
        })
        logger.warning("notification %s (%s %s by %s) attempt %d failed: %s", notification.pk,
                       notification.alert.key, notification.kind, notification.channel, notification.attempts, exc,
                       extra={"action": "notification_failed", "notification": notification.pk})
        return True
    with transaction.atomic():
        Notification.objects.filter(pk=notification.pk).update(status=NotificationStatus.SENT, sent_at=now,
                                                               last_error="")
        record("notification_sent", Actor.SYSTEM, at=now, data={
            "notification": notification.pk, "alert": notification.alert.key, "state": notification.kind,
            "channel": notification.channel, "attempt": notification.attempts,
        })
    return True
