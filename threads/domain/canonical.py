"""Canonical JSON: the one byte form of a value that hashes and checksums are computed over.

Sorted keys, no spaces, UTF-8 (not ASCII-escaped), datetimes as RFC 3339 UTC with microseconds.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with exactly six fractional digits and a `Z` suffix."""
    if value.tzinfo is None:
        raise ValueError("naive datetime: canonical times are timezone-aware")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    raise TypeError(f"not canonical JSON: {type(value).__name__}")


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_default,
    ).encode("utf-8")
