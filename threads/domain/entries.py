"""Summary entries: bounded and cited. Capping text, merging source seqs, keeping the newest
entries of a list; shared by the fold and the ledger replay."""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

MAX_SOURCES_PER_ENTRY = 20


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def section_entries(content: Mapping[str, Any], section: str) -> list[Mapping[str, Any]]:
    """The entries of a summary's `section` that are objects; none when it holds no list."""
    value = content.get(section)
    return [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def merge_sources(*groups: Iterable[int], keep: Container[int] = ()) -> list[int]:
    """Sorted unique seqs; an entry observed very often keeps its first and latest sources,
    and every seq in `keep` (events verification insists are cited)."""
    seqs = sorted({s for group in groups for s in group})
    if len(seqs) > MAX_SOURCES_PER_ENTRY:
        ends = set(seqs[:1] + seqs[-(MAX_SOURCES_PER_ENTRY - 1) :])
        seqs = [s for s in seqs if s in ends or s in keep]
    return seqs


def last_n(
    entries: list[dict[str, Any]],
    limit: int,
    protected: Callable[[Mapping[str, Any]], bool] = lambda entry: False,
) -> tuple[list[dict[str, Any]], int]:
    """The newest `limit` entries (entries are in log order); protected entries are never
    dropped, so the list may stay longer than `limit` until a later fold."""
    excess = len(entries) - limit
    if excess <= 0:
        return entries, 0
    kept: list[dict[str, Any]] = []
    dropped = 0
    for entry in entries:
        if dropped < excess and not protected(entry):
            dropped += 1
        else:
            kept.append(entry)
    return kept, dropped


def copy_entries(previous: Mapping[str, Any] | None, section: str) -> list[dict[str, Any]]:
    if not previous:
        return []
    return [dict(e) for e in previous.get(section) or [] if isinstance(e, dict)]
