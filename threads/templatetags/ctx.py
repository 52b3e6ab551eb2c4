"""Small display filters for the dashboard. None of them marks anything safe: agent-written
content stays autoescaped."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def num(value: Any) -> str:
    """1234567 -> 1,234,567 (token counts are read at a glance)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "" if value is None else str(value)


@register.filter
def pct(value: Any, digits: int = 0) -> str:
    try:
        return f"{float(value) * 100:.{int(digits)}f}%"
    except (TypeError, ValueError):
        return ""


@register.filter
def pretty(value: Any) -> str:
    """JSON for reading: indented, keys sorted, non-ASCII kept."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def get(mapping: Any, key: Any) -> Any:
    if isinstance(mapping, dict):
        return mapping.get(key, mapping.get(str(key)))
    return None


@register.filter
def spaced(value: Any) -> str:
    """tool_call -> tool call (kinds read as words)."""
    return str(value).replace("_", " ")
