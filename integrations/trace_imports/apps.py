"""Trace imports: recorded conversations (OpenAI, Anthropic, ctxadmin JSONL, a LangGraph
PostgreSQL store) read into threads of the log, on a queue of their own."""

from django.apps import AppConfig


class TraceImportsConfig(AppConfig):
    name = "integrations.trace_imports"
    label = "trace_imports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: the hooks import the models, which Django allows only once the app
        # registry is ready.
        from integrations.trace_imports import hooks

        hooks.register()
