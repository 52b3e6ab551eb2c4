"""Trace imports: recorded conversations (OpenAI, Anthropic, ctxadmin JSONL, a LangGraph
PostgreSQL store) read into threads of the log, on a queue of their own."""

from django.apps import AppConfig


class TraceImportsConfig(AppConfig):
    name = "integrations.trace_imports"
    label = "trace_imports"
    default_auto_field = "django.db.models.BigAutoField"
