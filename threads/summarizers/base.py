"""What a summariser backend is: something that folds events onto a previous summary."""

from __future__ import annotations

from typing import Any, Protocol


class SummarizerError(Exception):
    """A backend could not produce a candidate (endpoint down, bad answer, ...)."""


class Summarizer(Protocol):
    name: str

    def fold(
        self,
        *,
        previous: dict[str, Any] | None,
        events: list[dict[str, Any]],
        covered_from: int,
        covered_until: int,
    ) -> dict[str, Any]:
        """Summary content (schema_version 1) for `previous` + `events`; still to be verified."""
        ...
