"""A JSON parser that refuses what ctxadmin cannot store faithfully: NUL characters (PostgreSQL's
jsonb rejects them), lone UTF-16 surrogates (no UTF-8 form, so no canonical form to hash),
NaN/Infinity (including number literals that overflow to infinity), over-deep nesting, malformed
bodies, and bodies larger than DATA_UPLOAD_MAX_MEMORY_SIZE."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from threads.domain.errors import PayloadTooLarge

# A \\uD800-\\uDFFF escape; only then can a parsed string hold a lone surrogate (raw UTF-8 cannot).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NUL_ESCAPE = re.compile(r"\\u0000")


class JSONBodyError(ParseError):
    default_code = "invalid_json"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_string(value: str, *, surrogates: bool) -> None:
    if "\x00" in value:
        raise ValueError("NUL characters (\\u0000) are not allowed")
    if surrogates and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError("lone UTF-16 surrogates (\\ud800-\\udfff) are not allowed") from exc


def check_json_value(
    value: Any, *, max_depth: int, strings: bool = True, surrogates: bool = True
) -> None:
    """Raise ValueError for nesting deeper than max_depth, a non-finite number, or (checked
    only when `strings`) a NUL character or (when `surrogates`) a lone surrogate anywhere."""
    # The value sits in a virtual list at depth 0, so a top-level scalar is checked too.
    stack: list[tuple[Any, int]] = [([value], 0)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise ValueError(f"JSON nested deeper than {max_depth} levels")
        children: Any = item
        if type(item) is dict:
            if strings:
                for key in item:
                    _check_string(key, surrogates=surrogates)
            children = item.values()
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is str:
                if strings:
                    _check_string(child, surrogates=surrogates)
            elif kind is float and not math.isfinite(child):
                # 1e400 parses to inf: it has no JSON form to store or hash.
                raise ValueError("numbers must be finite")


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        # DRF reads the raw stream, bypassing Django's own DATA_UPLOAD_MAX_MEMORY_SIZE check
        # (done only by HttpRequest.body): enforce it here without reading past the limit.
        if stream is None:
            raw = b""
        elif limit is None:
            raw = stream.read()
        else:
            raw = stream.read(limit + 1)
            if len(raw) > limit:
                raise PayloadTooLarge(
                    f"request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)",
                    fields={"limit": limit},
                )
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
        surrogates = _SURROGATE_ESCAPE.search(text) is not None
        try:
            check_json_value(
                data,
                max_depth=settings.CTXADMIN_MAX_JSON_DEPTH,
                # JSON text cannot hold a raw NUL or surrogate inside a string: only an escape
                # can put one there, so without such an escape the strings need no walk.
                strings=surrogates or _NUL_ESCAPE.search(text) is not None,
                surrogates=surrogates,
            )
        except ValueError as exc:
            raise JSONBodyError(str(exc)) from exc
        return data
