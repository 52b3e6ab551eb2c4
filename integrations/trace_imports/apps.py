"""Trace imports: recorded conversations (OpenAI, Anthropic, ctxadmin JSONL, a LangGraph
PostgreSQL store) read into threads of the log, on a queue of their own."""

from django.apps import AppConfig


class TraceImportsConfig(AppConfig):
    name = "integrations.trace_imports"
    label = "trace_imports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: the service imports the models, which Django allows only once the app
        # registry is ready. Retention scrubs a deleted thread from the imports' reports.
        from integrations.trace_imports.services.retention import (
            trace_imports_retention_rows,
            trace_imports_retention_thread_delete,
        )
        from threads.services.retention import ThreadDeleter, thread_deleters

        deleter = ThreadDeleter(
            name="trace_imports",
            rows=trace_imports_retention_rows,
            delete=trace_imports_retention_thread_delete,
        )
        if deleter not in thread_deleters:
            thread_deleters.append(deleter)
