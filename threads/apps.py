from django.apps import AppConfig
from django.db.backends.signals import connection_created


class ThreadsConfig(AppConfig):
    name = "threads"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from threads.dbguard import install_sqlite_function

        connection_created.connect(install_sqlite_function, dispatch_uid="ctxadmin_log_seal")

        # Fold triggers run after every committed append (threads.services.events hooks).
        from threads.services import triggers

        triggers.install()
