"""Whether a list of LangChain messages (what a model received) is a request the providers
accept, offline: the OpenAI Chat Completions request shape, the OpenAI Responses input shape
and the Anthropic Messages request shape (system hoisted), each checked with the `openai` and
`anthropic` packages' own types (pydantic TypeAdapters over their TypedDicts), plus the pairing
rules their APIs enforce with a 400: every tool call answered by its result in the messages
right after it, and no result without its call.

    assert_provider_shapes(model_input)   # AssertionError naming the shape and the rule
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from anthropic.types import MessageParam
from langchain_core.messages import BaseMessage, convert_to_openai_messages
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter, ValidationError

_CHAT = TypeAdapter(list[ChatCompletionMessageParam])
_RESPONSES = TypeAdapter(ResponseInputParam)
_ANTHROPIC = TypeAdapter(list[MessageParam])


class ShapeError(AssertionError):
    """The messages are not a request the named provider shape accepts."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def chat_completions(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The Chat Completions `messages`, checked: the type, then each assistant message with
    tool_calls followed at once by one tool message per call, and no other tool message."""
    converted: list[dict[str, Any]] = convert_to_openai_messages(list(messages))  # type: ignore[assignment]
    try:
        _CHAT.validate_python(converted)
    except ValidationError as exc:
        raise ShapeError(f"OpenAI Chat Completions: not a message param: {exc}") from exc
    waiting: set[str] = set()
    for i, message in enumerate(converted):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                raise ShapeError(
                    f"OpenAI Chat Completions: message {i} answers {call_id!r}, which the "
                    "assistant message right before it did not call (an orphan result)"
                )
            waiting.discard(call_id)
            continue
        if waiting:
            raise ShapeError(
                f"OpenAI Chat Completions: message {i} ({role}) comes before the results of "
                f"{sorted(waiting)}: every tool call must be answered right after it"
            )
        waiting = {str(call["id"]) for call in message.get("tool_calls") or []}
    if waiting:
        raise ShapeError(f"OpenAI Chat Completions: the calls {sorted(waiting)} are unanswered")
    return converted


def responses_input(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The Responses API `input` items, checked: the type, then every function_call followed
    by its function_call_output before the next message, and no output without its call."""
    items: list[dict[str, Any]] = []
    for message in chat_completions_unchecked(messages):
        role = message["role"]
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": _text(message.get("content")),
                }
            )
            continue
        text = _text(message.get("content"))
        if text or not message.get("tool_calls"):
            items.append({"type": "message", "role": role, "content": text})
        for call in message.get("tool_calls") or []:
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }
            )
    try:
        _RESPONSES.validate_python(items)
    except ValidationError as exc:
        raise ShapeError(f"OpenAI Responses: not a ResponseInputParam: {exc}") from exc
    waiting: set[str] = set()
    called: set[str] = set()
    for i, item in enumerate(items):
        if item["type"] == "function_call":
            waiting.add(item["call_id"])
            called.add(item["call_id"])
        elif item["type"] == "function_call_output":
            if item["call_id"] not in called:
                raise ShapeError(f"OpenAI Responses: item {i} answers an unknown call")
            waiting.discard(item["call_id"])
        elif waiting:
            raise ShapeError(
                f"OpenAI Responses: item {i} comes before the outputs of {sorted(waiting)}"
            )
    if waiting:
        raise ShapeError(f"OpenAI Responses: no output for the calls {sorted(waiting)}")
    return items


def chat_completions_unchecked(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = convert_to_openai_messages(list(messages))  # type: ignore[assignment]
    return converted


def anthropic_messages(messages: Sequence[BaseMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The Messages API (`system`, `messages`), checked: system messages only leading (they
    are hoisted into `system`), the type, the first message a user's, no empty assistant
    turn, and every tool_use answered by a tool_result at the start of the very next (user)
    message, with no tool_result whose tool_use is not in the assistant turn before it."""
    converted = chat_completions_unchecked(messages)
    system: list[str] = []
    position = 0
    while position < len(converted) and converted[position]["role"] in ("system", "developer"):
        system.append(_text(converted[position].get("content")))
        position += 1
    turns: list[dict[str, Any]] = []
    for i, message in enumerate(converted[position:], start=position):
        role = message["role"]
        if role in ("system", "developer"):
            raise ShapeError(
                f"Anthropic Messages: message {i} is a system message after the conversation "
                "began: only leading system messages become `system`"
            )
        if role == "tool":
            blocks: list[dict[str, Any]] = [
                {
                    "type": "tool_result",
                    "tool_use_id": message["tool_call_id"],
                    "content": _text(message.get("content")),
                }
            ]
            role = "user"
        elif role == "assistant":
            blocks = []
            if _text(message.get("content")):
                blocks.append({"type": "text", "text": _text(message.get("content"))})
            for call in message.get("tool_calls") or []:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": json.loads(call["function"]["arguments"] or "{}"),
                    }
                )
        else:
            blocks = [{"type": "text", "text": _text(message.get("content"))}]
        if turns and turns[-1]["role"] == role:  # the API merges consecutive turns of a role
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    try:
        _ANTHROPIC.validate_python(turns)
        TypeAdapter(str).validate_python("\n".join(system))
    except ValidationError as exc:
        raise ShapeError(f"Anthropic Messages: not a MessageParam list: {exc}") from exc
    if turns and turns[0]["role"] != "user":
        raise ShapeError("Anthropic Messages: the first message must be the user's")
    for i, turn in enumerate(turns):
        if turn["role"] == "assistant" and not turn["content"]:
            raise ShapeError(f"Anthropic Messages: turn {i} is an empty assistant turn")
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in turn["content"] if b["type"] == "tool_result"]
        if results:
            before = turns[i - 1]["content"] if i > 0 else []
            asked = {b["id"] for b in before if b["type"] == "tool_use"}
            if not set(results) <= asked:
                raise ShapeError(
                    f"Anthropic Messages: turn {i} has tool_result blocks for "
                    f"{sorted(set(results) - asked)} with no tool_use in the turn before"
                )
            leading = turn["content"][: len(results)]
            if any(b["type"] != "tool_result" for b in leading):
                raise ShapeError(f"Anthropic Messages: turn {i}'s tool_results must come first")
        if uses:
            after = turns[i + 1]["content"] if i + 1 < len(turns) else []
            answered = {b["tool_use_id"] for b in after if b["type"] == "tool_result"}
            if set(uses) - answered:
                raise ShapeError(
                    f"Anthropic Messages: the tool_use blocks {sorted(set(uses) - answered)} of "
                    f"turn {i} have no tool_result in the next message"
                )
    return "\n".join(system), turns


def assert_provider_shapes(messages: Sequence[BaseMessage]) -> None:
    """Every shape at once (ShapeError, an AssertionError, naming the first rule broken)."""
    chat_completions(messages)
    responses_input(messages)
    anthropic_messages(messages)
