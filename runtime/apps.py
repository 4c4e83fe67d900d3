from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runtime"
    verbose_name = "Factory runtime"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
