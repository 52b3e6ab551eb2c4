"""The LangGraph saver's messages channel, mirrored into the thread's event log: which lists of
LangChain messages the log can hold (their ids, digests and JSON forms), the last version of
the channel the server is known to hold (`Head`), and the note a rollback's checkpoint adds to
the messages it gives back."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, message_to_dict
from langchain_core.runnables import RunnableConfig

from ctxadmin_client.errors import CtxadminError, MirrorConflict

MESSAGES_CHANNEL = "messages"
# The metadata key of a rollback's checkpoint (the server's), and the id of the note it adds.
REPAIR_KEY = "ctxadmin_repair"
REPAIR_NOTE_PREFIX = "ctxadmin-repair-"
# LangChain message types that have an event form in the log
MIRRORED_TYPES = ("human", "system", "ai", "AIMessageChunk", "tool", "chat")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def digest(form: Mapping[str, Any]) -> str:
    """SHA-256 of a message's JSON form, keys sorted: what the server computes too."""
    text = json.dumps(form, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


Entry = tuple[str, str, dict[str, Any]]  # a message's id, digest and JSON form


@dataclass(frozen=True)
class Head:
    """The last version of a thread's mirrored channel the server is known to hold: the message
    objects it was made of, and the tool calls they make and answer. A put whose list starts
    with these very objects sends only the messages after them."""

    version: str
    messages: tuple[Any, ...]
    calls: frozenset[str]
    answered: frozenset[str]

    def base_of(self, value: Sequence[Any]) -> bool:
        n = len(self.messages)
        return len(value) >= n and all(a is b for a, b in zip(value, self.messages, strict=False))


def mirrorable(
    value: Any,
    calls: frozenset[str] | None = frozenset(),
    answered: frozenset[str] = frozenset(),
) -> tuple[list[Entry], frozenset[str], frozenset[str]] | None:
    """(id, digest, JSON form) of each message, and the tool calls made and answered so far
    (`calls` and `answered`: those of the messages before it), when `value` is a list of
    LangChain messages the log can hold (each with an id and an event form); None otherwise,
    and the channel is stored as bytes. Whether each tool message answers a call is the
    server's to say: it mirrors a result it can bind, and names the conflict when it cannot
    (MirrorConflict), so that the log never silently stops following the agent."""
    if not isinstance(value, list):
        return None
    entries = []
    made: set[str] = set(calls or ())
    done: set[str] = set(answered)
    for message in value:
        if not isinstance(message, BaseMessage) or not message.id:
            return None
        if message.type not in MIRRORED_TYPES:
            return None
        if message.type in ("ai", "AIMessageChunk"):
            made.update(str(call.get("id")) for call in getattr(message, "tool_calls", []))
        elif message.type == "tool":
            done.add(str(getattr(message, "tool_call_id", "")))
        form = message_to_dict(message)
        try:
            entries.append((str(message.id), digest(form), form))
        except (TypeError, ValueError):
            return None
    return entries, frozenset(made), frozenset(done)


def head_of(version: str, messages: Sequence[Any]) -> Head:
    """The head a read of the channel leaves: the decoded messages, as the next put will get
    them back from LangGraph."""
    calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if message.type in ("ai", "AIMessageChunk"):
            calls.update(str(call.get("id")) for call in getattr(message, "tool_calls", []))
        elif message.type == "tool":
            answered.add(str(getattr(message, "tool_call_id", "")))
    return Head(version, tuple(messages), frozenset(calls), frozenset(answered))


def plain(value: Any) -> Any:
    """A value as plain JSON (what it is, or its text where JSON has no form for it)."""
    return json.loads(json.dumps(value, default=str))


def repair_note(checkpoint_id: str, side_effects: Sequence[Mapping[str, Any]]) -> SystemMessage:
    """The system message a rollback's checkpoint carries for the agent: the side effects that
    happened after the restored state, which it must not repeat. Its id is stable, so reading
    the checkpoint again never adds it twice."""
    lines = [
        "An administrator rolled this conversation back to an earlier state. These side "
        "effects happened after that state and are NOT undone; do not repeat them (check "
        "their status with the tool's own system first, by idempotency key):"
    ]
    for effect in side_effects:
        arguments = json.dumps(effect.get("arguments"), sort_keys=True, default=str)
        lines.append(
            f"- {effect.get('tool_name')}({arguments}): status {effect.get('status')}, "
            f"idempotency key {effect.get('idempotency_key')}"
        )
    return SystemMessage("\n".join(lines), id=f"{REPAIR_NOTE_PREFIX}{checkpoint_id}")


def note_position(messages: Sequence[Any]) -> int:
    """Where a note goes in a list of messages: first, after any leading system messages. Every
    provider's request shape accepts a system message there (Anthropic's Messages API takes
    only leading ones, as its `system`), and a note there never separates a call from its
    results."""
    position = 0
    while position < len(messages) and getattr(messages[position], "type", None) == "system":
        position += 1
    return position


def repair_note_add(
    values: dict[str, Any], checkpoint_id: str, side_effects: Sequence[Mapping[str, Any]]
) -> None:
    messages = values.get(MESSAGES_CHANNEL)
    if not isinstance(messages, list):
        return
    note = repair_note(checkpoint_id, side_effects)
    if not any(getattr(m, "id", None) == note.id for m in messages):
        position = note_position(messages)
        values[MESSAGES_CHANNEL] = [*messages[:position], note, *messages[position:]]


def mirror_conflict(exc: CtxadminError) -> MirrorConflict:
    return MirrorConflict(
        exc.code,
        exc.status,
        f"ctxadmin refused to mirror the agent's messages into the thread's log: {exc.message}",
        exc.fields,
    )


def config_of(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }
