"""What every trace format shares: reading a file of conversations, finding a conversation's
items, and the converter's output (event bodies exactly as an agent would post them).

A format module only turns one conversation's items into event bodies; numbering, binding,
idempotency and side-effect marking are the same for all of them
(integrations/trace_imports/readers/__init__)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threads.domain.canonical import canonical_json
from threads.domain.events import ROLES as MESSAGE_ROLES
from threads.domain.render import content_text

# The roles a message event may have (threads/domain/events.py), for the formats that name them.
ROLES = frozenset(MESSAGE_ROLES)


class ImportFormatError(ValueError):
    """The input is not a trace of the announced format; the message says where."""


@dataclass
class Conversation:
    """One source conversation, found inside a file's top-level list."""

    items: list[Any]
    id: str | None = None
    system: Any = None
    tools: list[Any] | None = None
    raw: Any = None  # the original object, for a stable digest when it has no id


@dataclass
class Converted:
    """Event bodies (without client_event_id) and what was left out, with why."""

    events: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @classmethod
    def with_system(cls, system: Any) -> Converted:
        """An output that opens with the top-level system message, when there is one."""
        out = cls()
        first = system_message(system)
        if first:
            out.events.append(first)
        return out


def _open(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        yield from f


def read_file(path: str | Path) -> list[Any]:
    """A JSON array, a single JSON object, or JSONL (one JSON value a line); .gz is unpacked."""
    path = Path(path)
    return parse_text("".join(_open(path)), where=str(path))


GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(data: bytes, *, where: str, max_unpacked: int | None = None) -> list[Any]:
    """The same as read_file for bytes already in memory (an upload): gzip is recognised by
    its magic number, whatever the name; `max_unpacked` caps what gzip may expand to."""
    if data[:2] == GZIP_MAGIC:
        limit = -1 if max_unpacked is None else max_unpacked + 1
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacked:
                data = unpacked.read(limit)
        except (OSError, EOFError) as exc:
            raise ImportFormatError(f"{where}: not a readable gzip file: {exc}") from exc
        if max_unpacked is not None and len(data) > max_unpacked:
            raise ImportFormatError(
                f"{where}: unpacks to more than {max_unpacked} bytes, the limit of an import "
                "(CTXADMIN_MAX_IMPORT_UNPACKED_BYTES)"
            )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{where}: not UTF-8 text: {exc}") from exc
    return parse_text(text, where=where)


def parse_text(text: str, *, where: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        values = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    values.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ImportFormatError(f"{where}: line {number} is not JSON: {exc}") from exc
        return values
    return value if isinstance(value, list) else [value]


ITEM_KEYS = ("messages", "input", "traj")


def conversation_of(value: Any, *, where: str) -> Conversation:
    """A conversation is a list of items, or an object holding it under messages/input/traj
    with optional id, system and tools (the providers' own request bodies)."""
    if isinstance(value, list):
        return Conversation(items=value, raw=value)
    if not isinstance(value, dict):
        raise ImportFormatError(f"{where}: a conversation is a list or an object")
    for key in ITEM_KEYS:
        if key in value:
            items = value[key]
            if isinstance(items, str):  # Responses API: `input` may be a plain string
                items = [{"type": "message", "role": "user", "content": items}]
            if not isinstance(items, list):
                raise ImportFormatError(f"{where}: `{key}` must be a list")
            raw_id = value.get("id")
            return Conversation(
                items=items,
                id=str(raw_id) if raw_id not in (None, "") else None,
                system=value.get("system") or value.get("instructions"),
                tools=value.get("tools"),
                raw=value,
            )
    raise ImportFormatError(f"{where}: no `messages`, `input` or `traj` list")


def external_id_for(conversation: Conversation, fmt: str) -> str:
    """The thread's external_id: the conversation's id, else a digest of its content, so the
    same file imports into the same threads every time."""
    if conversation.id:
        return conversation.id[:200]
    digest = hashlib.sha256(canonical_json(conversation.raw)).hexdigest()[:16]
    return f"{fmt}-{digest}"


def parse_arguments(value: Any) -> tuple[dict[str, Any], bool]:
    """Tool arguments as an object. OpenAI sends a JSON *string*; a string that is not a JSON
    object is kept whole under `_raw` (returned flag True) rather than dropped."""
    if isinstance(value, dict):
        return value, False
    if value is None or value == "":
        return {}, False
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {"_raw": value}, True
        if isinstance(parsed, dict):
            return parsed, False
    return {"_raw": value}, True


def message(role: str, content: Any, **metadata: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "message", "role": role, "content": content}
    meta = {k: v for k, v in metadata.items() if v not in (None, "", [], {})}
    if meta:
        body["metadata"] = meta
    return body


def tool_result(call_id: str, content: Any, status: str, **metadata: Any) -> dict[str, Any]:
    """A tool_result body: the provider's output as `result` when it sent one, and the
    metadata that is set."""
    body: dict[str, Any] = {"kind": "tool_result", "tool_call_id": call_id, "status": status}
    if content is not None:
        body["result"] = content
    meta = {k: v for k, v in metadata.items() if v}
    if meta:
        body["metadata"] = meta
    return body


def has_content(content: Any) -> bool:
    if content is None:
        return False
    if isinstance(content, str):
        return bool(content.strip())
    return bool(content)


def result_status(text: Any, *, is_error: bool = False) -> str:
    """A provider result carries no status. An explicit error flag, or a tool output that
    announces an error the way tau-bench's tools do ("Error: ..."), is `failed`; anything
    else the tool returned is `succeeded`."""
    if is_error:
        return "failed"
    if isinstance(text, str) and text.lstrip().lower().startswith("error:"):
        return "failed"
    return "succeeded"


class CallTracker:
    """Open calls per tool_call_id, mirroring how the log binds a result (to the latest open
    call with that id), so the converter can tell an orphan result before the service would
    refuse the whole batch."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}

    def call(self, tool_call_id: str) -> None:
        self._open[tool_call_id] = self._open.get(tool_call_id, 0) + 1

    def result(self, tool_call_id: str) -> bool:
        if self._open.get(tool_call_id, 0) <= 0:
            return False
        self._open[tool_call_id] -= 1
        return True


def system_message(system: Any) -> dict[str, Any] | None:
    """A top-level `system` (a string or a list of text blocks) as the first message."""
    if not has_content(system):
        return None
    if isinstance(system, list):
        return message("system", content_text(system))
    return message("system", str(system))
