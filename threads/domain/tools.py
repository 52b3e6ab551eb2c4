"""A thread's tool definitions: validation, naming and token counts (docs/pipeline.md,
"Tool definitions and repeated content").

Agents send tool definitions in the shapes the providers take them:

- OpenAI Chat Completions: `{"type": "function", "function": {"name", "description",
  "parameters"}}`;
- OpenAI Responses: flat, `{"type": "function", "name", "description", "parameters"}`;
- Anthropic Messages: `{"name", "description", "input_schema"}`.

A tool's tokens are tiktoken's count, in the thread's encoding, of the definition's canonical
JSON. That is an estimate: each provider reformats tools before the model sees them (and adds
its own framing), so the real count differs by a few tokens per tool.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threads.domain import tokens
from threads.domain.canonical import canonical_text
from threads.domain.errors import InvalidTools, PayloadTooLarge

MAX_TOOLS = 256
MAX_NAME_LENGTH = 200

_SHAPES = (
    '{"type": "function", "function": {"name", ...}} (OpenAI Chat Completions), '
    '{"type": "function", "name", ...} (OpenAI Responses) or '
    '{"name", "input_schema", ...} (Anthropic)'
)


@dataclass(frozen=True)
class ToolDefinition:
    """One tool as stored: its place in the list sent, its name, the definition unchanged,
    its canonical JSON's SHA-256 and its token count."""

    position: int
    name: str
    definition: dict[str, Any]
    content_hash: str
    token_count: int


def tool_name(definition: Any) -> str:
    """The tool's name in any of the three shapes; ValueError says what is wrong."""
    if not isinstance(definition, dict):
        raise ValueError(f"must be an object: {_SHAPES}")
    function = definition.get("function")
    if function is not None:
        if not isinstance(function, dict):
            raise ValueError('"function" must be an object with a "name"')
        name = function.get("name")
    else:
        name = definition.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a tool needs a name: {_SHAPES}")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"the name is longer than {MAX_NAME_LENGTH} characters")
    return name


def tool_token_counts(definitions: Sequence[Any], encoding: str) -> list[int]:
    """Each definition's tokens: tiktoken's count of its canonical JSON, in one call."""
    return tokens.count_texts([canonical_text(d) for d in definitions], encoding)


def tool_definitions(tools: Any, *, encoding: str, max_bytes: int) -> list[ToolDefinition]:
    """Validate a list of tool definitions and count each one's tokens.

    Raises InvalidTools naming every bad `tools[i]` (not a list, too many, no name, a name
    used twice), or PayloadTooLarge when a definition's canonical JSON exceeds `max_bytes`.
    """
    if not isinstance(tools, list):
        raise InvalidTools(
            "tools must be a list of tool definitions",
            fields={"tools": "must be a list of tool definitions"},
        )
    if len(tools) > MAX_TOOLS:
        raise InvalidTools(
            f"a thread holds at most {MAX_TOOLS} tools; this list has {len(tools)}",
            fields={"tools": f"at most {MAX_TOOLS} tools"},
        )
    errors: dict[str, str] = {}
    names: list[str] = []
    first_at: dict[str, int] = {}
    for index, definition in enumerate(tools):
        try:
            name = tool_name(definition)
        except ValueError as exc:
            errors[f"tools[{index}]"] = str(exc)
            continue
        if name in first_at:
            errors[f"tools[{index}]"] = f"the name {name!r} is taken by tools[{first_at[name]}]"
            continue
        first_at[name] = index
        names.append(name)
    if errors:
        raise InvalidTools(f"invalid tool definitions: {', '.join(errors)}", fields=errors)
    texts = [canonical_text(d) for d in tools]
    for index, text in enumerate(texts):
        size = len(text.encode("utf-8"))
        if size > max_bytes:
            raise PayloadTooLarge(
                f"tools[{index}] is {size} bytes as canonical JSON; the limit is {max_bytes}",
                fields={f"tools[{index}]": f"at most {max_bytes} bytes", "limit": max_bytes},
            )
    counts = tokens.count_texts(texts, encoding)
    return [
        ToolDefinition(
            position=index,
            name=name,
            definition=definition,
            content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            token_count=count,
        )
        for index, (name, definition, text, count) in enumerate(
            zip(names, tools, texts, counts, strict=True)
        )
    ]
