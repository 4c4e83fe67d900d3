"""System checks of the notification settings (docs/notifications.md): refused at start, with ids."""

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, register


@register()
def notification_settings(app_configs, **kwargs) -> list[Error]:
    problems = []
    secret = settings.FACTORY_NOTIFY_SECRET
    if secret and secret in (settings.FACTORY_EVENTS_SECRET, settings.FACTORY_GITHUB_WEBHOOK_SECRET):
        # Spec §13 keeps secrets apart: a receiver of notifications must not be able to sign events.
        problems.append(Error("FACTORY_NOTIFY_SECRET equals an intake secret; give notifications their own",
                              id="ops.E001"))
    url = settings.FACTORY_NOTIFY_WEBHOOK_URL
    if url and not secret.strip():
        problems.append(Error("FACTORY_NOTIFY_WEBHOOK_URL is set but FACTORY_NOTIFY_SECRET is not: "
                              "every webhook is signed", id="ops.E002"))
    if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
        problems.append(Error(f"FACTORY_NOTIFY_WEBHOOK_URL {url!r} is not an http(s) URL", id="ops.E003"))
    for name in ("FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS", "FACTORY_NOTIFY_MAX_ATTEMPTS"):
        if getattr(settings, name) < 1:
            problems.append(Error(f"{name} must be at least 1", id="ops.E004"))
    return problems
