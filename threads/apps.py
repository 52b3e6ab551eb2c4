"""The threads app: its database guard and the fold triggers are wired up once the app
registry is ready."""

from django.apps import AppConfig
from django.db.backends.signals import connection_created

from threads import checks  # noqa: F401  (registers the system checks)
from threads.database.guard import install_sqlite_function, install_sqlite_retention_function


class ThreadsConfig(AppConfig):
    name = "threads"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connection_created.connect(install_sqlite_function, dispatch_uid="ctxadmin_log_seal")
        connection_created.connect(
            install_sqlite_retention_function, dispatch_uid="ctxadmin_retention_delete"
        )

        # Fold triggers run after every committed append and after every fold (the hooks of
        # threads.services.events and threads.services.folding). Imported here, not at the
        # top: the services import the models, which Django allows only once the app
        # registry is ready, i.e. in ready().
        from threads.services import triggers

        triggers.install()
