from django.apps import AppConfig


class OpsConfig(AppConfig):
    """The processes that compose the layers below: the slot loop, workers, ``runserve``,
    the doctor, ``/status`` and ``/schedules`` (docs/design.md §1)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "ops"
