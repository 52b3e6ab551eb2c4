"""Reading recorded agent traces and converting them to ctxadmin events (docs/api.md,
"Import formats"); integrations.trace_imports.services stores them.

One thread per conversation; a conversation's `id` becomes the thread's external_id. Each
format's module converts a conversation to event bodies; `conversation_events` adds what every
format shares (tool definitions, side-effect marks, the thread's title and fixed tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from integrations.trace_imports.readers import (
    anthropic,
    jsonl,
    langgraph_store,
    openai_chat,
    openai_responses,
)
from integrations.trace_imports.readers.common import (
    ITEM_KEYS,
    Conversation,
    Converted,
    ImportFormatError,
    conversation_of,
    external_id_for,
    read_bytes,
    read_file,
)
from threads.domain import tokens
from threads.domain.render import content_text
from threads.domain.tools import tool_token_counts

FORMATS: dict[str, Callable[[Conversation], Converted]] = {
    "openai-chat": openai_chat.convert,
    "openai-responses": openai_responses.convert,
    "anthropic": anthropic.convert,
    "jsonl": jsonl.convert,
    "langgraph-postgres": langgraph_store.convert,
}
# The formats a file holds (and so an upload can): langgraph-postgres reads a database.
FILE_FORMATS = tuple(name for name in FORMATS if name != "langgraph-postgres")
# tau-bench airline's tools that change a booking: marked side-effecting unless told otherwise.
DEFAULT_SIDE_EFFECT_TOOLS = frozenset(
    {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
    }
)
TITLE_LENGTH = 80

__all__ = [
    "DEFAULT_SIDE_EFFECT_TOOLS",
    "Conversation",
    "FILE_FORMATS",
    "FORMATS",
    "ImportFormatError",
    "TITLE_LENGTH",
    "PreparedConversation",
    "conversation_events",
    "conversation_value",
    "read_conversations",
    "read_uploaded_conversations",
    "side_effect_tools_option",
    "upload_side_effect_tools",
]


@dataclass
class PreparedConversation:
    """A conversation converted for storing: its thread's external_id and settings, its event
    bodies in order, and what the converter skipped."""

    external_id: str
    events: list[dict[str, Any]]
    thread_settings: dict[str, Any]
    skipped: list[str] = field(default_factory=list)


def side_effect_tools_option(value: str | None) -> frozenset[str] | None:
    """The `--side-effect-tools` option (and the upload's field): `a,b` → those tools, `none`
    → no tool, absent or empty → None (the default tools)."""
    if value is None or not value.strip():
        return None
    if value.strip().lower() == "none":
        return frozenset()
    return frozenset(t.strip() for t in value.split(",") if t.strip())


def upload_side_effect_tools(value: str | None) -> frozenset[str]:
    """An upload's `side_effect_tools` field (the dashboard's form and `POST /api/v1/imports/`):
    a file of any agent, so absent or empty marks no tool (not tau-bench's, the command's
    default); `a,b` → those tools; `none` → no tool."""
    tools = side_effect_tools_option(value)
    return frozenset() if tools is None else tools


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def read_conversations(source: str, fmt: str) -> list[Any]:
    """The conversations of a file (or, for langgraph-postgres, of a store at a DSN)."""
    _check_format(fmt)
    if fmt == "langgraph-postgres":
        return langgraph_store.read_postgres(source)
    return _conversations_of_values(read_file(source), fmt)


def read_uploaded_conversations(
    data: bytes, fmt: str, *, name: str, max_unpacked: int | None = None
) -> list[Any]:
    """The conversations of an uploaded file's bytes (gzip recognised by its content). Only
    the FILE_FORMATS: a LangGraph store is read from its database, never uploaded."""
    _check_format(fmt)
    if fmt not in FILE_FORMATS:
        raise ImportFormatError(f"{fmt} reads a database by its DSN, not an uploaded file")
    return _conversations_of_values(
        read_bytes(data, where=name or "the upload", max_unpacked=max_unpacked), fmt
    )


def _conversations_of_values(values: list[Any], fmt: str) -> list[Any]:
    if values and all(
        isinstance(v, dict) and ("role" in v or "type" in v) and not set(ITEM_KEYS) & set(v)
        for v in values
    ):
        # A file of messages or items, one a line, is a single conversation.
        return [values]
    if fmt == "jsonl" and (
        jsonl.is_export(values)
        or (values and all(isinstance(v, dict) and "kind" in v for v in values))
    ):
        # A file of event objects (an export, or an agent's log) is a single conversation.
        if jsonl.is_export(values):
            return [values]
        return [{"messages": values}]
    return values


def conversation_value(value: Any, fmt: str, where: str) -> Conversation:
    if fmt == "jsonl" and isinstance(value, list) and jsonl.is_export(value):
        return jsonl.export_as_conversation(value)
    return conversation_of(value, where=where)


def _title(events: list[dict[str, Any]]) -> str:
    for event in events:
        if event["kind"] == "message" and event["role"] == "user":
            text = " ".join(content_text(event["content"]).split())
            return text[:TITLE_LENGTH]
    return ""


def _mark_side_effects(
    events: list[dict[str, Any]], external_id: str, side_effect_tools: Collection[str]
) -> None:
    """A call of a side-effecting tool gets an idempotency key derived from the thread and its
    tool_call_id (numbered when a real agent reused the id), the same on every import."""
    seen: dict[str, int] = {}
    for event in events:
        if event["kind"] != "tool_call" or event.get("side_effect"):
            continue
        call_id = event["tool_call_id"]
        seen[call_id] = seen.get(call_id, 0) + 1
        if event["tool_name"] in side_effect_tools:
            suffix = f"#{seen[call_id]}" if seen[call_id] > 1 else ""
            event["side_effect"] = True
            event["idempotency_key"] = f"{external_id}:{call_id}{suffix}"[:200]


def conversation_events(
    *,
    conversation: Conversation,
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
) -> PreparedConversation:
    """Convert one conversation: event bodies with the tool definitions on the first one and
    side-effecting calls marked, and the thread settings it implies (title, fixed tokens)."""
    if fmt == "langgraph-postgres":
        # The live saver's conversion marks side effects itself, as the saver does, so that
        # the thread continues live without appending twice.
        converted = langgraph_store.convert(conversation, side_effect_tools)
    else:
        converted = FORMATS[fmt](conversation)
    external_id = external_id_for(conversation, fmt)
    events = converted.events
    if conversation.tools and events:
        events[0] = {
            **events[0],
            "metadata": {**events[0].get("metadata", {}), "tools": conversation.tools},
        }
    _mark_side_effects(events, external_id, side_effect_tools)
    thread_settings: dict[str, Any] = {"title": _title(events)}
    if conversation.tools:
        # Tool definitions are part of every request's fixed input (I in docs/pipeline.md,
        # "Budget and triggers"). integrations.trace_imports.services stores them as the thread's
        # tools too; counted the same way (each definition's canonical JSON, docs/pipeline.md,
        # "Tool definitions and repeated content"), the two agree.
        tools = conversation.tools if isinstance(conversation.tools, list) else [conversation.tools]
        thread_settings["fixed_tokens"] = sum(tool_token_counts(tools, tokens.DEFAULT_ENCODING))
    return PreparedConversation(
        external_id=external_id,
        events=events,
        thread_settings=thread_settings,
        skipped=converted.skipped,
    )
