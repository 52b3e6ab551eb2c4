"""JSON text read and written with orjson, giving exactly what the standard library gives.

orjson reads and writes large JSON several times faster than `json`, but not always the same:
it reads an integer beyond 64 bits as a float (silently), and writes some values `json` writes
otherwise or refuses (such integers, non-str keys, subclasses of str, int, dict and list, which
Django and DRF pass around). Here those cases go to `json`, so that the values read and the
documents written are the ones `json` would have given.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Digits as "0", everything else as a space: a run of 19 "0"s marks a number orjson may read
# differently (an integer beyond 64 bits has at least 19 digits; a float with as many reads the
# same, and only costs the slower path).
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19
# What orjson must not write itself: these go to the `default` below, which refuses them.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
# The standard library writes these two raw; JavaScript (and DRF's renderer) escape them.
_LINE_SEPARATORS = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))


def json_loads(text: str | bytes) -> Any:
    """The value of a JSON text, as `json.loads` reads it."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if _LONG_RUN in raw.translate(_DIGITS):
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # what orjson refuses (1e400, NaN), json may still read
        return json.loads(raw)


def json_string_loads(text: str) -> Any:
    """`json_loads` for a text that is most often one JSON string (a message's content): a
    string holds no number, so it needs no look for long ones."""
    if text[:1] == '"':
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # not one string after all (as '"a" 1')
            return json.loads(text)
    return json_loads(text)


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} goes to the standard library")


def json_dumps_compact(value: Any) -> bytes | None:
    """`value` as compact UTF-8 JSON (separators "," and ":", non-ASCII as is, U+2028 and
    U+2029 escaped): what `json.dumps` writes, byte for byte but for the spelling of floats
    that the standard library writes with an exponent ("1e-05", orjson "0.00001"; "1e-07",
    orjson "1e-7"): the same number, read back equal. None when orjson refuses the value (or
    would write it otherwise): the caller writes it with `json`. A value read from JSON holds
    no NaN or infinity (which orjson writes as null), so an answer built from JSON is safe."""
    try:
        written = orjson.dumps(value, default=_refuse, option=_PASSTHROUGH)
    except TypeError:
        return None
    for raw, escaped in _LINE_SEPARATORS:
        if raw in written:
            written = written.replace(raw, escaped)
    return written
