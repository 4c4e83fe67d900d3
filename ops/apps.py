from django.apps import AppConfig


class OpsConfig(AppConfig):
    """The processes that compose the layers below: the slot loop, workers, ``runserve``,
    the doctor, ``/status`` and ``/schedules`` (docs/design.md §1)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "ops"

    def ready(self):
        # The heartbeat's report reads the doctor's document, which lives in this layer;
        # the runtime's builtin adapter runs it by name (docs/design.md §8).
        from runtime.adapters.builtin import register_builtin

        from . import checks  # noqa: F401  (registers the notification settings' checks)
        from .health import health_report

        register_builtin("health", health_report)

        from django.db.models.signals import post_migrate

        from .roles import sync_roles_after_migrate

        # The groups Approvers and Viewers, after every migrate (permissions exist only then).
        post_migrate.connect(sync_roles_after_migrate, sender=self, dispatch_uid="ops.roles")
