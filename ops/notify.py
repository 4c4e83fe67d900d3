"""The notifier: which conditions someone should be told about, raised and cleared once each
(docs/notifications.md).

A condition is a doctor anomaly (``anomaly:<key>`` for each key of ``/status``'s
``anomalies``) or proposals of a loop pending longer than
``FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS`` (``proposalsWaiting:<loop>``). Each pass
(``raise_and_clear``) compares them with the open ``Alert`` rows: a new condition opens an
alert and writes one ``raised`` notification per channel, a condition gone clears its alert
and writes one ``cleared`` notification per channel — in one transaction, so a crash never
writes one without the other. Sending is ``ops.notify_send``'s, outside this transaction.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Min

from lib.instants import format_instant
from ops.doctor import collect_status
from ops.models import Alert, Notification
from runtime.models import Actor, Preview, Proposal, ProposalStatus
from runtime.services.journal import record

logger = logging.getLogger(__name__)

#: The loop part of the key of proposals that belong to no loop (an injected or GitHub event's).
NO_LOOP = "-"


def channels() -> list[str]:
    """The configured channels: ``email`` when ``FACTORY_NOTIFY_EMAIL_TO`` is set, ``webhook``
    when ``FACTORY_NOTIFY_WEBHOOK_URL`` is; none means notifications are off."""
    found = []
    if settings.FACTORY_NOTIFY_EMAIL_TO:
        found.append("email")
    if settings.FACTORY_NOTIFY_WEBHOOK_URL:
        found.append("webhook")
    return found


def conditions(*, now: datetime) -> dict[str, dict]:
    """Every condition holding at ``now``: key → what is seen (``{anomaly, value}`` or
    ``{loop, pending, oldestProposalId, waitingSince}``). A constant number of queries (the
    doctor's, and one grouped count of the waiting proposals)."""
    status = collect_status(now=now)
    found = {f"anomaly:{key}": {"anomaly": key, "value": status.get(key)} for key in status["anomalies"]}
    waited = now - timedelta(seconds=settings.FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS)
    waiting = list(
        Proposal.objects.filter(status=ProposalStatus.PENDING, created_at__lt=waited)
        .order_by().values("loop").annotate(pending=Count("id"), oldest=Min("id"), newest=Max("id"),
                                            since=Min("created_at"))
    )
    previews = newest_previews([row["newest"] for row in waiting])
    for row in waiting:
        loop = row["loop"] or NO_LOOP
        found[f"proposalsWaiting:{loop}"] = {
            "loop": row["loop"], "pending": row["pending"], "oldestProposalId": row["oldest"],
            "waitingSince": format_instant(row["since"]), "newestProposalId": row["newest"],
            "preview": previews.get(row["newest"]),
        }
    return found


def newest_previews(proposal_ids: list[int]) -> dict[int, dict]:
    """``proposal id → {status, summary}`` of these proposals' previews, in one query: the
    summary only (the outcome and its one line), never the dry run's output or data, which
    may name what a notification channel should not carry (docs/notifications.md)."""
    if not proposal_ids:
        return {}
    rows = Preview.objects.filter(proposal_id__in=proposal_ids).values_list("proposal_id", "status", "outcome", "summary")
    return {
        proposal: {"status": status, "summary": f"{outcome}: {summary}" if outcome and summary else outcome or None}
        for proposal, status, outcome, summary in rows
    }


def _message(alert: Alert, kind: str, now: datetime) -> dict:
    """The JSON a webhook receives, and what an e-mail says (docs/notifications.md)."""
    return {
        "schemaVersion": "factory.notification/v1",
        "alert": alert.key,
        "state": kind,
        "at": format_instant(now),
        "raisedAt": format_instant(alert.raised_at),
        "detail": alert.detail,
    }


def _notify(alert: Alert, kind: str, now: datetime) -> None:
    for channel in channels():
        Notification.objects.create(
            alert=alert, kind=kind, channel=channel, message=_message(alert, kind, now),
            created_at=now, next_attempt_at=now,
        )
    record(f"alert_{kind}", Actor.SYSTEM, at=now, data={"alert": alert.key, "detail": alert.detail,
                                                        "channels": channels()})


def raise_and_clear(*, now: datetime) -> tuple[int, int]:
    """One pass of the notifier at ``now``; returns (raised, cleared). Does nothing with no channel."""
    if not channels():
        return 0, 0
    found = conditions(now=now)
    raised = cleared = 0
    with transaction.atomic():
        open_alerts = {alert.key: alert for alert in Alert.objects.filter(cleared_at__isnull=True)}
        for key, alert in open_alerts.items():
            if key not in found and Alert.objects.filter(pk=alert.pk, cleared_at__isnull=True).update(cleared_at=now):
                alert.cleared_at = now
                _notify(alert, "cleared", now)
                cleared += 1
        for key, detail in found.items():
            if key in open_alerts:
                continue
            try:
                with transaction.atomic():
                    alert = Alert.objects.create(key=key, detail=detail, raised_at=now)
                    _notify(alert, "raised", now)
            except IntegrityError:
                continue  # another notifier raised it at the same moment
            raised += 1
    if raised or cleared:
        logger.info("alerts: %d raised, %d cleared", raised, cleared,
                    extra={"action": "alerts_changed", "raised": raised, "cleared": cleared})
    return raised, cleared
