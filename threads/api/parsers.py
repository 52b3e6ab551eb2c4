"""A JSON parser that refuses what ctxadmin cannot store faithfully: NUL characters (PostgreSQL's
jsonb rejects them), NaN/Infinity, duplicate-free but over-deep nesting, and malformed bodies."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class JSONBodyError(ParseError):
    default_code = "invalid_json"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_json_value(value: Any, *, max_depth: int) -> None:
    """Raise ValueError for nesting deeper than max_depth or a NUL character anywhere."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > max_depth:
                raise ValueError(f"JSON nested deeper than {max_depth} levels")
            for key, child in item.items():
                if "\x00" in key:
                    raise ValueError("NUL characters (\\u0000) are not allowed")
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if depth > max_depth:
                raise ValueError(f"JSON nested deeper than {max_depth} levels")
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str) and "\x00" in item:
            raise ValueError("NUL characters (\\u0000) are not allowed")


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict[str, Any] | None = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONBodyError("request body is not UTF-8") from exc
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except RecursionError as exc:
            raise JSONBodyError("JSON nested too deeply") from exc
        except ValueError as exc:
            raise JSONBodyError(f"malformed JSON: {exc}") from exc
        try:
            check_json_value(data, max_depth=settings.CTXADMIN_MAX_JSON_DEPTH)
        except ValueError as exc:
            raise JSONBodyError(str(exc)) from exc
        return data
