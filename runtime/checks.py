"""Start-up invariants as system checks (DESIGN §4; STYLE 12).

``runtime.E001``: the registry does not validate (one error per problem, naming the
file, the entry and the rule). ``runtime.E002``: time is not UTC-aware.
"""

from django.conf import settings
from django.core.checks import Error, register

from .registry import RegistryInvalid, store

REGISTRY_TAG = "factory_registry"


@register(REGISTRY_TAG)
def check_registry(app_configs=None, **kwargs):
    store.reset()
    try:
        store.current()
    except RegistryInvalid as exc:
        return [Error(str(err), hint="fix the file and run `manage.py registry check`", id="runtime.E001") for err in exc.errors]
    return []


@register()
def check_time_settings(app_configs=None, **kwargs):
    if settings.USE_TZ is not True or settings.TIME_ZONE != "UTC":
        return [Error("USE_TZ must be True and TIME_ZONE 'UTC': every instant in the runtime is aware UTC", id="runtime.E002")]
    return []
