"""The bodies of a LangGraph put and write, read without DRF's field machinery when they are
plainly well-formed.

The saver sends a put and a write on every step of a graph, and DRF's nested serializers (a
field object per value, per message, per write, each run through its validators) cost more CPU
than the rest of the view. These readers accept only what the view's serializers would accept
unchanged — strings of printable ASCII with no surrounding spaces, plain integers, the exact
types — and give the same validated data; for anything else they say so (None) and the view
runs its serializer, which answers the same 400 in the error shape as before. The serializers
stay the request schema (drf-spectacular) and the rules: these readers only skip their work
when there is nothing for it to change or refuse.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from integrations.langgraph_checkpointer.domain.checkpoint_ids import checkpoint_id_problem

MAX_SIDE_EFFECT_TOOLS = 1000
_DIGEST = re.compile(r"[0-9a-f]{64}")
_INT32 = (-(2**31), 2**31 - 1)


class _Unsure(Exception):
    """The value is not one the fast reader may accept: the serializer decides."""


def _text(value: Any, max_length: int, *, blank: bool = False) -> str:
    """A StrictCharField's value as the serializer would give it, or _Unsure: only text that
    trimming, the null-character and surrogate checks would leave alone (printable ASCII with
    no surrounding whitespace)."""
    if type(value) is not str or len(value) > max_length:
        raise _Unsure
    if not value:
        if blank:
            return value
        raise _Unsure
    if not value.isascii() or not value.isprintable() or value != value.strip():
        raise _Unsure
    return value


def _checkpoint_id(value: Any, *, blank: bool = False) -> str:
    """A checkpoint_id the serializer would accept as it is (its rule: the domain's)."""
    text = _text(value, 64, blank=blank)
    if text and checkpoint_id_problem(text) is not None:
        raise _Unsure
    return text


def _optional_text(
    body: dict[str, Any], key: str, max_length: int, default: Any, *, blank: bool = False
) -> Any:
    if key not in body:
        return default
    return _text(body[key], max_length, blank=blank)


def _integer(value: Any, low: int | None = None, high: int | None = None) -> int:
    if type(value) is not int or (low is not None and value < low):
        raise _Unsure
    if high is not None and value > high:
        raise _Unsure
    return value


def _dict(value: Any) -> dict[str, Any]:
    # Parsed JSON: string keys, JSON values, which is what DictField gives back.
    if type(value) is not dict:
        raise _Unsure
    return dict(value)


# The keys each object of a body may have: its serializer's fields (a serializer refuses any
# other, tests/api/test_langgraph_body_read.py holds the two to the same sets).
PUT_KEYS = frozenset(
    ("checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata")
    + ("values", "messages")
)
VALUE_KEYS = frozenset(("channel", "version", "type", "data"))
MESSAGES_KEYS = frozenset(
    ("channel", "version", "entries", "side_effect_tools", "base_version", "base_count")
)
ENTRY_KEYS = frozenset(("id", "digest", "message"))
WRITES_KEYS = frozenset(
    ("checkpoint_ns", "checkpoint_id", "task_id", "task_path", "writes", "interrupts")
    + ("side_effect_tools",)
)
WRITE_KEYS = frozenset(("idx", "channel", "type", "data", "messages"))
INTERRUPT_KEYS = frozenset(("id", "value"))


def _object(value: Any, keys: frozenset[str]) -> dict[str, Any]:
    """A body's object with only the keys its serializer declares, or _Unsure."""
    body = _dict(value)
    if not keys.issuperset(body):
        raise _Unsure
    return body


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise _Unsure
    return value


def _bytes(value: Any) -> bytes:
    if type(value) is not str:
        raise _Unsure
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Unsure from exc


def _entry(value: Any) -> dict[str, Any]:
    """A MessageEntrySerializer's data: id, digest, and message when it was sent."""
    entry = _object(value, ENTRY_KEYS)
    digest = entry.get("digest")
    if type(digest) is not str or not _DIGEST.fullmatch(digest):
        raise _Unsure
    out: dict[str, Any] = {"id": _text(entry.get("id"), 180), "digest": digest}
    if "message" in entry:
        out["message"] = entry["message"]  # parsed JSON: what JSONField accepts as it is
    return out


def _side_effect_tools(body: dict[str, Any]) -> list[str]:
    if "side_effect_tools" not in body:
        return []
    tools = _list(body["side_effect_tools"])
    if len(tools) > MAX_SIDE_EFFECT_TOOLS:
        raise _Unsure
    return [_text(tool, 200) for tool in tools]


def _messages(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    body = _object(value, MESSAGES_KEYS)
    return {
        "channel": _text(body.get("channel"), 255),
        "version": _text(body.get("version"), 255),
        "entries": [_entry(e) for e in _list(body.get("entries"))],
        "side_effect_tools": _side_effect_tools(body),
        "base_version": None
        if body.get("base_version") is None
        else _text(body["base_version"], 255),
        "base_count": _integer(body["base_count"], 0) if "base_count" in body else 0,
    }


def _value(value: Any) -> dict[str, Any]:
    body = _object(value, VALUE_KEYS)
    return {
        "channel": _text(body.get("channel"), 255),
        "version": _text(body.get("version"), 255),
        "type": _text(body.get("type"), 64),
        "data": _bytes(body.get("data")),
    }


def put_body_read(data: Any) -> dict[str, Any] | None:
    """ThreadLanggraphCheckpointsApi.InputSerializer's validated data, or None when the
    serializer must read the body itself."""
    try:
        body = _object(data, PUT_KEYS)
        parent = body.get("parent_checkpoint_id", "")
        return {
            "checkpoint_ns": _optional_text(body, "checkpoint_ns", 255, "", blank=True),
            "checkpoint_id": _checkpoint_id(body.get("checkpoint_id")),
            "parent_checkpoint_id": None if parent is None else _checkpoint_id(parent, blank=True),
            "checkpoint": _dict(body.get("checkpoint")),
            "metadata": _dict(body["metadata"]) if "metadata" in body else {},
            "values": [_value(v) for v in _list(body["values"])] if "values" in body else [],
            "messages": _messages(body.get("messages")),
        }
    except _Unsure:
        return None


def _write(value: Any) -> dict[str, Any]:
    """A write as WriteSerializer validates it: bytes (type and data) or messages, each
    message with its JSON form."""
    body = _object(value, WRITE_KEYS)
    out: dict[str, Any] = {
        "idx": _integer(body.get("idx"), *_INT32),
        "channel": _text(body.get("channel"), 255),
    }
    has_bytes = "type" in body and "data" in body
    if has_bytes == ("messages" in body):
        raise _Unsure
    if has_bytes:
        out["type"] = _text(body["type"], 64)
        out["data"] = _bytes(body["data"])
        return out
    if "type" in body or "data" in body:
        raise _Unsure
    entries = [_entry(e) for e in _list(body["messages"])]
    if any(e.get("message") is None for e in entries):
        raise _Unsure
    out["messages"] = entries
    return out


def _interrupt(value: Any) -> dict[str, Any]:
    body = _object(value, INTERRUPT_KEYS)
    if "value" not in body:
        raise _Unsure
    return {"id": _text(body.get("id"), 180), "value": body["value"]}


def writes_body_read(data: Any) -> dict[str, Any] | None:
    """ThreadLanggraphWritesApi.InputSerializer's validated data, or None when the serializer
    must read the body itself."""
    try:
        body = _object(data, WRITES_KEYS)
        return {
            "checkpoint_ns": _optional_text(body, "checkpoint_ns", 255, "", blank=True),
            "checkpoint_id": _checkpoint_id(body.get("checkpoint_id")),
            "task_id": _text(body.get("task_id"), 200),
            "task_path": _optional_text(body, "task_path", 500, "", blank=True),
            "writes": [_write(w) for w in _list(body.get("writes"))],
            "interrupts": [_interrupt(i) for i in _list(body["interrupts"])]
            if "interrupts" in body
            else [],
            "side_effect_tools": _side_effect_tools(body),
        }
    except _Unsure:
        return None
