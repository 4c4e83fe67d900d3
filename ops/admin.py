"""The ops tables in the admin: people's API tokens (docs/api.md "Tokens") — a person creates and
revokes their own, a superuser anyone's, a new token is shown once in the message after saving —
and the notifier's alerts and notifications, read-only (docs/notifications.md)."""

from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse

from runtime import clock
from runtime.admin.common import ReadOnlyAdmin

from .api.tokens import TokenRefused, create_token, revoke_token
from .models import Alert, ApiToken, Notification
from .notify import channels


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("label", "user", "prefix", "created_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    list_select_related = ("user",)
    readonly_fields = ("prefix", "created_at", "created_by", "revoked_at")
    actions = ["revoke_selected"]

    def get_fields(self, request, obj=None):
        if obj is not None:
            return ("user", "label", *self.readonly_fields)
        return ("user", "label") if request.user.is_superuser else ("label",)

    def get_readonly_fields(self, request, obj=None):
        return ("user", "label", *self.readonly_fields) if obj is not None else ()

    def get_queryset(self, request):
        tokens = super().get_queryset(request)
        return tokens if request.user.is_superuser else tokens.filter(user=request.user)

    # Every staff user manages their own tokens; the model permissions are not needed for that.
    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request) and (
            obj is None or request.user.is_superuser or obj.user_id == request.user.pk)

    def has_add_permission(self, request):
        return self.has_module_permission(request)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Revoked, never deleted: the journal's labels keep their meaning.
        return False

    def save_model(self, request, obj, form, change):
        owner = obj.user if request.user.is_superuser and obj.user_id else request.user
        try:
            token, raw = create_token(owner, obj.label, by=request.user, now=clock.database_now())
        except TokenRefused as exc:
            self.message_user(request, f"refused: {exc.code}: {exc.detail}", messages.ERROR)
            return
        obj.pk = token.pk
        self.message_user(
            request, f"API token {token.label!r} of {owner.get_username()}: {raw} — copy it now, it is not shown again",
            messages.WARNING,
        )

    def response_add(self, request, obj, post_url_continue=None):
        if obj.pk is None:  # refused in save_model: the message says why
            return HttpResponseRedirect(reverse("admin:ops_apitoken_add"))
        return HttpResponseRedirect(reverse("admin:ops_apitoken_changelist"))

    def log_addition(self, request, obj, message):
        # create_token journals the creation; the admin's own log adds nothing to it.
        return None

    @admin.action(description="Revoke the selected tokens")
    def revoke_selected(self, request, queryset):
        now = clock.database_now()
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                revoke_token(token.pk, by=request.user, now=now)
                revoked += 1
            except TokenRefused as exc:
                self.message_user(request, f"token {token.pk}: {exc.code}: {exc.detail}", messages.ERROR)
        self.message_user(request, f"{revoked} token(s) revoked")


def channels_words(found: list[str]) -> str:
    """Whether the notifier tells anyone (``ops.notify.channels``), in a sentence naming where or how to turn it on."""
    if not found:
        return ("Notifications are off: no channel is configured, so no alert is raised or sent. Set "
                "FACTORY_NOTIFY_EMAIL_TO or FACTORY_NOTIFY_WEBHOOK_URL to be told (docs/notifications.md).")
    where = {"email": f"by e-mail to {', '.join(settings.FACTORY_NOTIFY_EMAIL_TO)}", "webhook": "to the webhook"}
    return f"Notifications are on: each alert is sent when raised and when cleared, {' and '.join(where[c] for c in found)}."


#: What an empty alert list says, with notifications on.
NO_ALERT = (
    "No alert: one is raised while the doctor reports an anomaly (GET /status) or a loop's proposal waits "
    "longer than FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS, and cleared when that ends."
)


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = ("key", "raised_at", "cleared_at")
    list_filter = (("cleared_at", admin.EmptyFieldListFilter),)
    search_fields = ("key",)

    def changelist_view(self, request, extra_context=None):
        found = channels()
        return super().changelist_view(request, {
            **(extra_context or {}), "channels_words": channels_words(found),
            "empty_words": NO_ALERT if found else "No alert: notifications are off (above).",
        })


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ("alert", "kind", "channel", "status", "attempts", "next_attempt_at", "sent_at", "last_error")
    list_filter = ("status", "channel", "kind")
    list_select_related = ("alert",)
