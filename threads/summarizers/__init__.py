"""Summariser backends (docs/pipeline.md, "Fold with a summariser backend"). `get_summarizer(name)`
picks one by its stored name."""

from __future__ import annotations

from django.conf import settings

from threads.summarizers.base import Summarizer, SummarizerError
from threads.summarizers.llm import LLMSummarizer
from threads.summarizers.structured import StructuredSummarizer

__all__ = [
    "LLMSummarizer",
    "StructuredSummarizer",
    "Summarizer",
    "SummarizerError",
    "get_summarizer",
    "summarizer_unavailable",
]


def get_summarizer(name: str) -> Summarizer:
    """The backend called `name` ("structured" or "llm").

    The llm backend reads CTXADMIN_LLM_BASE_URL / _MODEL / _API_KEY from Django settings and
    raises SummarizerError when no base URL is configured.
    """
    if name == StructuredSummarizer.name:
        return StructuredSummarizer()
    if name == LLMSummarizer.name:
        return LLMSummarizer.from_settings()
    raise SummarizerError(f"unknown summariser backend {name!r}; use structured or llm")


def summarizer_unavailable(name: str) -> str | None:
    """Why the backend `name` could not fold on this server, or None when it could: the llm
    backend needs CTXADMIN_LLM_BASE_URL, else every fold of the thread would fail."""
    if name == LLMSummarizer.name and not settings.CTXADMIN_LLM_BASE_URL:
        return (
            "this server has no LLM endpoint configured (CTXADMIN_LLM_BASE_URL is unset); "
            "use structured"
        )
    return None
