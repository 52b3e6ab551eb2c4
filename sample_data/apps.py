"""The demo's sample data and its `demo` command: threads that show every part of the
product (a code review, a summary history with a rollback, a live LangGraph agent, imported
conversations). It may use every app; no app uses it."""

from django.apps import AppConfig


class SampleDataConfig(AppConfig):
    name = "sample_data"
    default_auto_field = "django.db.models.BigAutoField"
