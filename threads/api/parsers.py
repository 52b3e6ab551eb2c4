"""A JSON parser that refuses what ctxadmin cannot store faithfully: NUL characters (PostgreSQL's
jsonb rejects them), lone UTF-16 surrogates (no UTF-8 form, so no canonical form to hash),
NaN/Infinity (including number literals that overflow to infinity), numbers a double cannot hold
(they would be silently rounded), integers of more digits than Python converts from text,
over-deep nesting, malformed bodies, and bodies larger than
DATA_UPLOAD_MAX_MEMORY_SIZE."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from threads.domain.errors import DomainError, PayloadTooLarge

# A \\uD800-\\uDFFF escape; only then can a parsed string hold a lone surrogate (raw UTF-8 cannot).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NUL_ESCAPE = re.compile(r"\\u0000")


class JSONBodyError(ParseError):
    default_code = "invalid_json"


class NumberNotRepresentable(DomainError):
    code = "number_not_representable"
    status = 400


class _Unrepresentable:
    """Stands in, while parsing, for a number literal a double cannot hold."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _parse_float(literal: str) -> Any:
    """A number literal with a fraction or an exponent, as the double it names, when the double
    says what the literal says: printed back with as many significant digits as the literal
    has, it is the same number. `0.1`, `1e10` and `0.10000000000000001` (0.1 printed with 17
    digits) pass; `2.000…0001` with 5,000 digits (2.0 as a double) and `1e-400` (0.0) do not:
    storing them would change what the agent sent. Integers never come here: Python keeps
    them exact, and so do canonical JSON, SQLite's JSON text and PostgreSQL's jsonb."""
    value = float(literal)
    if not math.isfinite(value):
        return value  # check_json_value refuses it: it has no JSON form at all
    exact = Decimal(literal)
    digits = len(exact.normalize().as_tuple().digits)
    if Decimal(format(value, f".{digits}g")) == exact:
        return value
    return _Unrepresentable(literal)


def _unrepresentable_path(data: Any) -> tuple[str, str]:
    """The path (`events[1].metadata.x`) and literal of the first unrepresentable number."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Unrepresentable):
            return path or "(body)", item.literal
        if isinstance(item, dict):
            children = [(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))
    raise AssertionError("no unrepresentable number in the body")


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


def _parse_int(literal: str) -> Any:
    """An integer literal as Python's exact integer, up to the digits Python converts from
    text (`sys.get_int_max_str_digits()`, 4,300 by default: a guard against converting text of
    quadratic cost); a longer one stands in as unrepresentable."""
    limit = sys.get_int_max_str_digits()
    if limit and len(literal) - literal.startswith("-") > limit:
        return _Unrepresentable(literal)
    return int(literal)


def strict_json_loads(text: str) -> Any:
    """`text` as JSON, refusing what ctxadmin cannot store faithfully (the module docstring):
    JSONBodyError (400 invalid_json) or NumberNotRepresentable (400), naming the problem."""
    unrepresentable: list[str] = []

    def parse_number(parse: Any) -> Any:
        def parsed(literal: str) -> Any:
            value = parse(literal)
            if isinstance(value, _Unrepresentable):
                unrepresentable.append(literal)
            return value

        return parsed

    try:
        data = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=parse_number(_parse_float),
            parse_int=parse_number(_parse_int),
        )
    except RecursionError as exc:
        raise JSONBodyError("JSON nested too deeply") from exc
    except ValueError as exc:
        raise JSONBodyError(f"malformed JSON: {exc}") from exc
    if unrepresentable:
        path, literal = _unrepresentable_path(data)
        shown = literal if len(literal) <= 40 else f"{literal[:20]}…{literal[-10:]}"
        if any(c in literal for c in ".eE"):
            raise NumberNotRepresentable(
                f"the number at {path} cannot be stored exactly as a double (it would be "
                "rounded); send it as a string, or with at most 17 significant digits",
                fields={path: f"not representable as a double: {shown} ({len(literal)} chars)"},
            )
        limit = sys.get_int_max_str_digits()
        raise NumberNotRepresentable(
            f"the integer at {path} has more than {limit} digits; send it as a string",
            fields={path: f"an integer of more than {limit} digits: {shown}"},
        )
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
        return strict_json_loads(text)
