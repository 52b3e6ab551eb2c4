"""Removing a redacted event's content from a stored copy of it (docs/repairs.md, "Redaction
beside the event"): pure rules, no database.

A *needle* is a text the redacted event held (its whole text, each string leaf of at least
MIN_NEEDLE characters, a secret found in it). Every occurrence of any needle inside a string is
replaced by the placeholder, in one pass (so a placeholder that contains a needle is never
replaced again), the longest needle first (so the whole text goes before its parts). JSON keeps
its shape: objects stay objects with the same keys, lists stay lists; only string values
change (keys are the shape a reader depends on: a LangChain message's `tool_calls`).

A summary's entry that cites the redacted seq is replaced by a placeholder entry that keeps its
citations and its structural fields (status, kind, authority, tool call id...): the cited event
still exists, redacted, so the citation still resolves, and the entry says what it was without
what it said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from threads.domain.events import (
    ANNOTATION_TYPES,
    AUTHORITIES,
    KIND_FIELDS,
    RESULT_STATUSES,
    ROLES,
    SERVER_KINDS,
)
from threads.domain.fold import PENDING_KINDS, TASK_STATUSES
from threads.domain.ledger import TOOL_STATUSES

# Shorter needles would match inside unrelated words (the redaction's needles keep to it too).
MIN_NEEDLE = 4

# The fields of a summary entry that are structure, not content: kept in a placeholder entry.
ENTRY_STRUCTURE = frozenset(
    {
        "source_event_ids",
        "status",
        "authority",
        "confidence",
        "kind",
        "side_effect",
        "tool_call_id",
        "idempotency_key",
        "blocking",
        "call_seq",
        "request_seq",
        "approval_seq",
        "seq",
        "expires_at",
        "superseded_at",
        "id",
        "role",
    }
)
# Sections of a summary's content that hold entries (task is one entry of its own).
SUMMARY_TASK = "task"


# Words an event holds as structure, never as content: a redacted message's role or a result's
# status is a leaf of its data too, and replacing "user" everywhere would wreck every
# summary's authorities. (LangChain's message types and a tool message's status as well.)
STRUCTURE_WORDS = frozenset(
    {
        *ROLES,
        *RESULT_STATUSES,
        *ANNOTATION_TYPES,
        *AUTHORITIES,
        *KIND_FIELDS,
        *SERVER_KINDS,
        *TOOL_STATUSES,
        *TASK_STATUSES,
        *PENDING_KINDS,
        # LangChain's message JSON form, kept in a mirrored message's metadata
        "human",
        "chat",
        "AIMessageChunk",
        "tool_call",
        "tool_calls",
        "invalid_tool_call",
        "function",
        "function_call",
        "success",
        "error",
        "stop",
        "length",
        "content_filter",
        "true",
        "false",
        "null",
    }
)


def content_needles(needles: Sequence[str], *, structure: Sequence[str] = ()) -> list[str]:
    """The needles that are content: without the structure words and without `structure`, the
    ids and names the redacted event keeps or that other rows key on (its tool call id, its
    client_event_id, its tool's name, its side effect's idempotency key: an id, not content).
    """
    kept = {s for s in structure if s} | STRUCTURE_WORDS
    return [n for n in needles if isinstance(n, str) and len(n) >= MIN_NEEDLE and n not in kept]


class Needles:
    """The needles of one redaction, compiled once: `sub` replaces them in a text."""

    def __init__(self, needles: Sequence[str], placeholder: str) -> None:
        # A needle inside the placeholder could never be told from it: left out.
        unique = sorted(
            {
                n
                for n in needles
                if isinstance(n, str) and len(n) >= MIN_NEEDLE and n not in placeholder
            },
            key=lambda n: (-len(n), n),
        )
        self.texts: tuple[str, ...] = tuple(unique)
        self.placeholder = placeholder
        self._pattern = re.compile("|".join(re.escape(n) for n in unique)) if unique else None
        # As UTF-8, and as JSON spells it with non-ASCII escaped (a `json` value's bytes).
        self.encoded: tuple[bytes, ...] = tuple(
            {n.encode("utf-8") for n in unique} | {json.dumps(n)[1:-1].encode() for n in unique}
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def found_in(self, text: str) -> bool:
        return self._pattern is not None and self._pattern.search(text) is not None

    def found_in_bytes(self, data: bytes) -> bool:
        """A needle's UTF-8 bytes occur in `data`: the cheap test before decoding a blob."""
        return any(n in data for n in self.encoded)

    def sub(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda _: self.placeholder, text)


def scrub_json(value: Any, needles: Needles) -> Any:
    """`value` (any JSON) with every needle replaced inside its string values (not its keys);
    the same object when nothing changed, so a caller tells a change by identity."""
    if isinstance(value, str):
        new = needles.sub(value)
        return value if new == value else new
    if isinstance(value, list):
        items = [scrub_json(item, needles) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(k, scrub_json(v, needles)) for k, v in value.items()]
        if all(v is v0 for (_, v), v0 in zip(pairs, value.values(), strict=True)):
            return value
        return dict(pairs)
    return value


def _cites(entry: Mapping[str, Any], seq: int) -> bool:
    sources = entry.get("source_event_ids")
    return isinstance(sources, list) and seq in sources


def placeholder_entry(entry: Mapping[str, Any], needles: Needles) -> dict[str, Any]:
    """The entry with its content gone: structure, citations and numbers kept (with any needle
    in them replaced), every other field the placeholder (a fact's `key` too, numbered by the
    entry's first citation so that two redacted facts stay two facts)."""
    placeholder = needles.placeholder
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ENTRY_STRUCTURE or (key == "tool" and isinstance(value, str)):
            # A tool's name is the call's structure, as its id is.
            out[key] = scrub_json(value, needles)
        elif isinstance(value, bool | int | float) or value is None:
            # Numbers are the entry's structure (its seqs: the task's `unit_seq`, which a fold
            # reads as a number), not its text.
            out[key] = value
        else:
            out[key] = placeholder
    if "key" in entry:
        sources = entry.get("source_event_ids") or ["?"]
        out["key"] = f"{placeholder}#{sources[0]}"
    out["redacted"] = True
    return out


def summary_scrub(content: Any, *, seq: int, needles: Needles) -> Any:
    """A summary's content without the redacted event: every needle replaced in every string,
    and each entry citing `seq` (in any section, the task included) replaced by its placeholder
    entry (after, so that a placeholder is never taken for a needle). The same object when
    nothing changed."""
    scrubbed = scrub_json(content, needles)
    if not isinstance(scrubbed, dict):
        return scrubbed
    out: dict[str, Any] = {}
    changed = scrubbed is not content
    for section, value in scrubbed.items():
        if isinstance(value, list):
            entries = [
                placeholder_entry(e, needles) if isinstance(e, Mapping) and _cites(e, seq) else e
                for e in value
            ]
            changed = changed or any(a is not b for a, b in zip(entries, value, strict=True))
            out[section] = entries
        elif section == SUMMARY_TASK and isinstance(value, Mapping) and _cites(value, seq):
            out[section] = placeholder_entry(value, needles)
            changed = True
        else:
            out[section] = value
    return out if changed else content
