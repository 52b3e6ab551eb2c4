"""Canonical JSON: the one byte form of a value that hashes and checksums are computed over.

Sorted keys, no spaces, UTF-8 (not ASCII-escaped), datetimes as RFC 3339 UTC with microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with exactly six fractional digits and a `Z` suffix."""
    if value.tzinfo is None:
        raise ValueError("naive datetime: canonical times are timezone-aware")
    utc = value.astimezone(UTC)
    # %Y does not pad years before 1000 on every platform ("562-09-04"); RFC 3339 needs four.
    return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.%fZ")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    raise TypeError(f"not canonical JSON: {type(value).__name__}")


_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_default,
)
_encode_string = json.encoder.encode_basestring
# The C encoder that json.dumps builds on each call, built once: the append path encodes each
# field of every event on its own, and building it costs more than encoding a short value.
# No circular-reference bookkeeping: canonical values are trees (parsed JSON and the dicts
# built from it); a cycle still fails, with RecursionError.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_encode_tree = (
    _c_make_encoder(None, _default, _encode_string, None, ":", ",", True, False, False)
    if _c_make_encoder is not None
    else None
)


def canonical_text(value: Any) -> str:
    """The canonical form as text (its UTF-8 bytes are canonical_json's). Raises ValueError for
    NaN or infinity, TypeError for a value JSON has no form for."""
    if type(value) is str:
        return _encode_string(value)  # type: ignore[no-any-return]
    if _encode_tree is None:
        return _ENCODER.encode(value)
    return "".join(_encode_tree(value, 0))


def canonical_json(value: Any) -> bytes:
    return canonical_text(value).encode("utf-8")


def join_canonical(members: Mapping[str, str]) -> str:
    """The canonical text of an object whose member values are canonical texts already.

    Gives exactly canonical_text of the decoded object, without encoding the values again: the
    append path encodes each field of an event once and assembles from the pieces the
    idempotency digest, the chained form, the stored columns and the answer.
    """
    parts = ["{"]
    for name in sorted(members):
        # One join at the end: each (possibly large) value is copied once.
        parts += (_key(name), members[name], ",")
    if len(parts) > 1:
        parts.pop()
    parts.append("}")
    return "".join(parts)


_KEYS: dict[str, str] = {}


def _key(name: str) -> str:
    """A member's name, encoded, with its colon. The same few field names again and again:
    each is encoded once."""
    encoded = _KEYS.get(name)
    if encoded is None:
        encoded = _ENCODER.encode(name) + ":"
        if len(_KEYS) < 1024:
            _KEYS[name] = encoded
    return encoded


def _stable_float(value: float) -> float | int:
    if value == 0.0:
        return 0.0  # PostgreSQL's numeric has no negative zero: -0.0 comes back as 0.0
    if "e+" in repr(value):
        # Python writes 1e16 and up with an exponent; PostgreSQL's jsonb keeps such a number
        # as an exact decimal with no fraction, and it comes back as an integer.
        return int(value)
    return value


def stable_numbers(value: Any) -> Any:
    """`value` with its numbers in the form every supported database gives back.

    PostgreSQL stores event bodies as jsonb, whose numbers are decimals: a float that Python
    writes with a positive exponent (1e+16, 1.5e+300) is read back as an integer, and -0.0 as
    0.0. An event hashed over the float would then fail verification on its own database.
    These are the same JSON numbers; normalizing them before anything is hashed or stored
    makes the stored, chained and answered forms one. Returns `value` itself (no copy) when
    nothing changes.
    """
    kind = type(value)
    if kind is float:
        return _stable_float(value)
    if kind is dict:
        changed = None
        for key, item in value.items():
            new = stable_numbers(item)
            if new is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = new
        return value if changed is None else changed
    if kind is list:
        items = [stable_numbers(item) for item in value]
        same = all(a is b for a, b in zip(items, value, strict=True))
        return value if same else items
    return value
