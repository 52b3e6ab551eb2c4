"""The default backend: the deterministic structured fold (threads.domain.fold)."""

from __future__ import annotations

from typing import Any

from threads.domain.fold import fold_structured


class StructuredSummarizer:
    name = "structured"

    def fold(
        self,
        *,
        previous: dict[str, Any] | None,
        events: list[dict[str, Any]],
        covered_from: int,
        covered_until: int,
    ) -> dict[str, Any]:
        return fold_structured(
            previous=previous,
            events=events,
            covered_from=covered_from,
            covered_until=covered_until,
        )
