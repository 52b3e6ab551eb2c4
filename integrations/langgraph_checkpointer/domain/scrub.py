"""A redacted event's content removed from the LangGraph checkpointer's stored values
(docs/langgraph.md, "Redaction"): pure rules over the bytes LangGraph's serializer wrote.

A channel value or a pending write is stored as LangGraph sent it: a type tag and bytes. Its
strings are replaced inside the decoded value, never in the bytes as they are (msgpack prefixes
each string with its length): `msgpack` is decoded with its extension types kept as they are
(a LangChain message is an extension whose payload is msgpack too, decoded and re-encoded the
same way), `json` as JSON, `bytes` as UTF-8 text when it is. A value whose bytes still hold a
needle afterwards (an encoding this does not read, such as `pickle`) is replaced whole by the
placeholder, as msgpack: the content must go, even when its shape cannot stay.
"""

from __future__ import annotations

import json
from typing import Any

import ormsgpack

from threads.domain.scrub import Needles, scrub_json

_OPTIONS = ormsgpack.OPT_NON_STR_KEYS


class _Ext:
    """A msgpack extension as read: its code and its payload, decoded (`value`) when it is
    msgpack itself, else its bytes (`raw`). (Not a dataclass: ormsgpack would write one as a
    map instead of asking `default`.)"""

    __slots__ = ("code", "value", "raw")

    def __init__(self, code: int, value: Any = None, raw: bytes | None = None) -> None:
        self.code, self.value, self.raw = code, value, raw


def _ext_read(code: int, data: bytes) -> _Ext:
    try:
        return _Ext(code, value=ormsgpack.unpackb(data, ext_hook=_ext_read, option=_OPTIONS))
    except ValueError:
        return _Ext(code, raw=data)


def _ext_write(value: Any) -> Any:
    if isinstance(value, _Ext):
        if value.raw is not None:
            return ormsgpack.Ext(value.code, value.raw)
        return ormsgpack.Ext(value.code, _pack(value.value))
    raise TypeError(f"{type(value).__name__} has no msgpack form")


def _pack(value: Any) -> bytes:
    return ormsgpack.packb(value, default=_ext_write, option=_OPTIONS)


def _walk(value: Any, needles: Needles) -> Any:
    if isinstance(value, str):
        return needles.sub(value)
    if isinstance(value, list | tuple):
        return [_walk(item, needles) for item in value]
    if isinstance(value, dict):
        return {k: _walk(v, needles) for k, v in value.items()}  # keys are shape
    if isinstance(value, _Ext) and value.raw is None:
        return _Ext(value.code, value=_walk(value.value, needles))
    return value


def _decoded_scrub(type_: str, data: bytes, needles: Needles) -> bytes:
    if type_ == "msgpack":
        try:
            value = ormsgpack.unpackb(data, ext_hook=_ext_read, option=_OPTIONS)
        except ValueError:
            return data
        return _pack(_walk(value, needles))
    if type_ == "json":
        try:
            loaded = json.loads(data)
        except ValueError:
            return data
        return json.dumps(scrub_json(loaded, needles), ensure_ascii=False).encode("utf-8")
    if type_ in ("bytes", "bytearray"):
        try:
            return needles.sub(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            return data
    return data


def typed_value_scrub(type_: str, data: bytes, needles: Needles) -> tuple[str, bytes] | None:
    """(type, bytes) of the value without the needles, or None when it holds none."""
    if not needles or not needles.found_in_bytes(data):
        return None
    scrubbed = _decoded_scrub(type_, data, needles)
    if needles.found_in_bytes(scrubbed):
        return "msgpack", _pack(needles.placeholder)
    return type_, scrubbed
