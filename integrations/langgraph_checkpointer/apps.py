"""The LangGraph checkpointer's server side: the storage and API that
`ctxadmin_client.langgraph.CtxadminSaver` writes to and reads from (docs/api.md,
"LangGraph checkpointer")."""

from django.apps import AppConfig


class LanggraphCheckpointerConfig(AppConfig):
    name = "integrations.langgraph_checkpointer"
    label = "langgraph_checkpointer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: the hooks import the models, which Django allows only once the app
        # registry is ready.
        from integrations.langgraph_checkpointer import hooks

        hooks.register()
