"""Repeated content: events whose content repeats an earlier event's byte for byte
(docs/pipeline.md, "Tool definitions and repeated content").

An event's content is what the model reads of it again when it is repeated:

- `message`: its `content` (a string or a list of parts);
- `tool_call`: its `tool_name` with its `arguments` (the same call again);
- `tool_result`: its `result`.

Other kinds have no content here. Content is compared by the SHA-256 of its canonical JSON, so
two events repeat each other exactly when their content's canonical bytes are equal, whatever
their kinds. Empty content (`""`, `[]`, `{}`, `null`, an absent result) never counts as a repeat.
A repeat wastes its own stored token count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threads.domain.canonical import canonical_text

CONTENT_KINDS = ("message", "tool_call", "tool_result")
_EMPTY = frozenset({'""', "[]", "{}", "null"})


@dataclass(frozen=True)
class Repeat:
    seq: int
    kind: str
    first_seq: int  # the earliest event in the window with the same content
    tokens: int  # what the repeat costs: its own token count
    content_hash: str


def content_of(kind: str, data: Mapping[str, Any]) -> Any:
    """The content of an event of `kind` with the kind's fields `data`; None when it has none."""
    if kind == "message":
        return data.get("content")
    if kind == "tool_call":
        return {"tool_name": data.get("tool_name"), "arguments": data.get("arguments")}
    if kind == "tool_result":
        return data.get("result")
    return None


def content_hash(kind: str, data: Mapping[str, Any]) -> str | None:
    """SHA-256 of the content's canonical JSON; None for no or empty content."""
    content = content_of(kind, data)
    if content is None:
        return None
    text = canonical_text(content)
    if text in _EMPTY:
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def find_repeats(events: Iterable[tuple[int, str, Mapping[str, Any], int]]) -> list[Repeat]:
    """The repeats among `events` — (seq, kind, the kind's fields, token_count) in seq order —
    most wasteful first (then by seq). Linear in the events; keeps one hash per distinct
    content, never the content."""
    first: dict[str, int] = {}
    repeats: list[Repeat] = []
    for seq, kind, data, token_count in events:
        digest = content_hash(kind, data)
        if digest is None:
            continue
        earlier = first.setdefault(digest, seq)
        if earlier != seq:
            repeats.append(
                Repeat(
                    seq=seq, kind=kind, first_seq=earlier, tokens=token_count, content_hash=digest
                )
            )
    repeats.sort(key=lambda r: (-r.tokens, r.seq))
    return repeats
