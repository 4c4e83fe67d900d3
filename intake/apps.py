from django.apps import AppConfig


class IntakeConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'intake'
