"""The ops layer's tables: the runtime's own processes as the doctor sees them (docs/design.md §11;
docs/operations.md), the people's API tokens (docs/api.md) and the notifications (docs/notifications.md)."""

from django.conf import settings
from django.db import models


class ProcessRecord(models.Model):
    """One long-running process (a slot loop, a run worker): who and where it is, since when it
    runs and when it was last seen, on the database's clock, and how far its own clock is
    from the database's (``clock_offset_seconds`` = host clock − database clock, measured
    around one query, at its midpoint). Written by the process itself
    (``ops.process_rows``); the doctor lists the recently seen ones and their skew.
    """

    role = models.CharField(max_length=32)
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    clock_offset_seconds = models.FloatField()

    class Meta:
        ordering = ["role", "host", "pid"]
        indexes = [models.Index(fields=["last_seen_at"], name="process_last_seen_idx")]

    def __str__(self) -> str:
        return f"{self.role} {self.host}:{self.pid}"


class ApiToken(models.Model):
    """A person's API token (docs/api.md): ``Authorization: Bearer <token>`` on ``/api/``.

    Only the SHA-256 of the token is kept (``digest``, 64 hex digits): the token is
    ``secrets.token_urlsafe`` with full entropy, so no salt or slow hash is needed, and it
    is shown once, when created (``ops.api.tokens.create_token``). ``prefix`` (its first
    characters) tells tokens apart in listings. A token acts as its person: it decides
    only when the person holds ``approve_proposal``, and the journal names the person and
    the token's ``label``. ``revoked_at`` set means refused for good; a revoked row stays,
    so the journal's labels keep their meaning.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    label = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "-created_at"]
        verbose_name = "API token"
        constraints = [
            # A label names one live token of a person: the journal's label must say which.
            models.UniqueConstraint(
                fields=["user", "label"], condition=models.Q(revoked_at__isnull=True), name="api_token_live_label",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.prefix}…)"

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None


class Alert(models.Model):
    """A condition someone is told about (docs/notifications.md): raised when it appears, cleared
    when it goes. ``key`` names it: ``anomaly:<doctor key>`` (``anomaly:stoppedSchedules``) or
    ``proposalsWaiting:<loop>`` (``-`` for proposals of events that are not ticks).
    ``detail`` is what was seen when raised. Written by ``ops.notify.raise_and_clear``.
    """

    key = models.CharField(max_length=200)
    detail = models.JSONField(default=dict)
    raised_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            # One open alert per condition: two notifiers at once cannot raise it twice.
            models.UniqueConstraint(fields=["key"], condition=models.Q(cleared_at__isnull=True),
                                    name="alert_open_key"),
        ]

    def __str__(self) -> str:
        return self.key


class NotificationStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    #: Every attempt failed (``FACTORY_NOTIFY_MAX_ATTEMPTS``): kept, with its last error.
    FAILED = "failed"


class Notification(models.Model):
    """One message about an alert on one channel (``email`` or ``webhook``): written with the
    alert's change, sent later by ``ops.notify_send.send_one``, retried with back-off."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=8)  # "raised" or "cleared"
    channel = models.CharField(max_length=8)  # "email" or "webhook"
    message = models.JSONField()
    status = models.CharField(max_length=8, choices=NotificationStatus.choices, default=NotificationStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["alert", "kind", "channel"], name="notification_once"),
        ]
        indexes = [
            # The sender's queue (ops.notify_send.send_one): pending rows by when they are due.
            models.Index(fields=["next_attempt_at"], condition=models.Q(status="pending"),
                         name="notification_due_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.alert.key} {self.kind} by {self.channel}"


class ReaderZone(models.Model):
    """The time zone a person reads the pages in (docs/web.md, "Times in the reader's zone"): an
    IANA name (``Australia/Lord_Howe``); no row means the browser's zone. Set on ``/me/``."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    zone = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.zone}"
