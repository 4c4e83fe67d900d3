from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runtime"
    verbose_name = "Factory runtime"

    def ready(self):
        from django.db.backends.signals import connection_created

        from . import checks  # noqa: F401  (registers the system checks)
        from .instant_loader import use_compiled_instant_loader

        connection_created.connect(use_compiled_instant_loader, dispatch_uid="runtime.instant_loader")
