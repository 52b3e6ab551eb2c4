"""A LangGraph checkpointer backed by ctxadmin: `CtxadminSaver`.

    from ctxadmin_client.langgraph import CtxadminSaver
    saver = CtxadminSaver.from_url("https://ctxadmin.example.com", api_key)
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "order-10086"}})

A LangGraph `thread_id` is the ctxadmin thread's `external_id` (created on the first put).
Channel values and pending writes are serialised by LangGraph's own serializer (`self.serde`)
and sent as bytes, which ctxadmin stores and returns unchanged; it never decodes them. The
`messages` channel of the root graph, when it holds LangChain messages, is sent as their JSON
forms (`message_to_dict`) instead and mirrored into the thread's event log, each message once:
a checkpoint refers to the log rather than holding another copy of the list, and so does a
pending write of messages to it. A put sends only the messages after the last version the server
is known to hold (the whole list again when that knowledge is stale).

Needs the `langgraph` extra (`pip install "ctxadmin-client[langgraph]"`); importing
`ctxadmin_client` alone does not import LangGraph.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import random
import threading
import time
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from langchain_core.messages import (
    BaseMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.types import Command, Interrupt

from ctxadmin_client import _api
from ctxadmin_client._http import Call, Operation, Sleep, one
from ctxadmin_client._http import nodelay_transport as nodelay_transport  # bench/storage.py's
from ctxadmin_client._langgraph_ledger import guard_decision, ledger_apply
from ctxadmin_client.async_client import AsyncClient
from ctxadmin_client.client import Client
from ctxadmin_client.errors import CtxadminError, MirrorConflict, NotFoundError, chain_check

__all__ = ["CtxadminSaver"]

T = TypeVar("T")

MESSAGES_CHANNEL = "messages"
# The metadata key of a rollback's checkpoint (the server's), and the id of the note it adds.
REPAIR_KEY = "ctxadmin_repair"
REPAIR_NOTE_PREFIX = "ctxadmin-repair-"
INTERRUPT_ACTION = "langgraph.interrupt"
INTERRUPT = "__interrupt__"  # LangGraph's channel of interrupt() writes
PAGE = 100  # the server's largest page of checkpoints
STORED_KEPT = 32  # checkpoint ids remembered per thread
# How long a write of messages waits for its checkpoint's put (LangGraph sends both from
# background threads, so the write may come first), and the pause between looks.
PUT_WAIT_S = 2.0
PUT_GAP_S = 0.05  # after a put ends, the next one may not have started yet
PUT_POLL_S = 0.002
ID_WAIT_S = 0.05  # how long a write waits for LangGraph to give its messages ids
# LangChain message types that have an event form in the log
MIRRORED_TYPES = ("human", "system", "ai", "AIMessageChunk", "tool", "chat")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _digest(form: Mapping[str, Any]) -> str:
    """SHA-256 of a message's JSON form, keys sorted: what the server computes too."""
    text = json.dumps(form, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


Entry = tuple[str, str, dict[str, Any]]  # a message's id, digest and JSON form


@dataclass(frozen=True)
class _Head:
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


def _mirrorable(
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
            entries.append((str(message.id), _digest(form), form))
        except (TypeError, ValueError):
            return None
    return entries, frozenset(made), frozenset(done)


def _head_of(version: str, messages: Sequence[Any]) -> _Head:
    """The head a read of the channel leaves: the decoded messages, as the next put will get
    them back from LangGraph."""
    calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if message.type in ("ai", "AIMessageChunk"):
            calls.update(str(call.get("id")) for call in getattr(message, "tool_calls", []))
        elif message.type == "tool":
            answered.add(str(getattr(message, "tool_call_id", "")))
    return _Head(version, tuple(messages), frozenset(calls), frozenset(answered))


def _plain(value: Any) -> Any:
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


def _note_position(messages: Sequence[Any]) -> int:
    """Where a note goes in a list of messages: first, after any leading system messages. Every
    provider's request shape accepts a system message there (Anthropic's Messages API takes
    only leading ones, as its `system`), and a note there never separates a call from its
    results."""
    position = 0
    while position < len(messages) and getattr(messages[position], "type", None) == "system":
        position += 1
    return position


def _repair_note_add(
    values: dict[str, Any], checkpoint_id: str, side_effects: Sequence[Mapping[str, Any]]
) -> None:
    messages = values.get(MESSAGES_CHANNEL)
    if not isinstance(messages, list):
        return
    note = repair_note(checkpoint_id, side_effects)
    if not any(getattr(m, "id", None) == note.id for m in messages):
        position = _note_position(messages)
        values[MESSAGES_CHANNEL] = [*messages[:position], note, *messages[position:]]


def _mirror_conflict(exc: CtxadminError) -> MirrorConflict:
    return MirrorConflict(
        exc.code,
        exc.status,
        f"ctxadmin refused to mirror the agent's messages into the thread's log: {exc.message}",
        exc.fields,
    )


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class CtxadminSaver(BaseCheckpointSaver[str]):
    """LangGraph's `BaseCheckpointSaver` over ctxadmin's REST API, sync and async.

    Args:
        client: a `Client` (the sync methods use it; the async ones run it in a worker thread
            unless an `AsyncClient` is also at hand) or an `AsyncClient` (the async methods use
            it; the sync ones a `Client` made with the same URL and key).
        serde: LangGraph's serializer for channel values and writes (its default when None).
        side_effect_tools: names of the tools whose calls are side effects: their `tool_call`
            events say so (with the tool call id as idempotency key), so a rollback lists them,
            and the side-effect ledger drives resume: a call it holds is never run again
            (`get_tuple` hands back its recorded result, or raises `SideEffectPending` while
            its outcome is unknown; docs/clients.md "Exactly once with LangGraph").
        allow_broken_chain: read a checkpoint whose messages reach past a break in the thread's
            hash chain (an event changed after it was written, as the last integrity check
            found) instead of raising `ChainBrokenError`. Off by default: an agent never
            resumes from tampered history unknowingly.

    An `interrupt()` opens an approval request in ctxadmin; `resume_command(config)` gives the
    `Command(resume=...)` a reviewer's decision makes. A checkpoint a rollback wrote carries the
    side effects after the restored state: reading it adds a system message naming them.

    `CtxadminSaver.from_url(base_url, api_key, **kw)` makes both clients (`kw`: `timeout`,
    `retries`).
    """

    def __init__(
        self,
        client: Client | AsyncClient,
        *,
        serde: SerializerProtocol | None = None,
        side_effect_tools: Collection[str] = (),
        allow_broken_chain: bool = False,
    ) -> None:
        super().__init__(serde=serde)
        self.side_effect_tools = sorted(set(side_effect_tools))
        self.allow_broken_chain = allow_broken_chain
        self._client: Client | None = client if isinstance(client, Client) else None
        self._async_client: AsyncClient | None = client if isinstance(client, AsyncClient) else None
        # thread_id -> {message id: digest} of the messages its log is known to hold
        self._mirrored: dict[str, dict[str, str]] = {}
        # thread_id -> the last version of its mirrored channel the server is known to hold
        self._heads: dict[str, _Head] = {}
        # thread_id -> the checkpoint ids it is known to hold (the latest few), the puts under
        # way, and when the last one ended: a write of messages waits for its checkpoint's put
        self._stored: dict[str, dict[str, None]] = {}
        self._putting: dict[str, int] = {}
        self._put_ended: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_url(
        cls,
        base_url: str,
        api_key: str,
        *,
        serde: SerializerProtocol | None = None,
        side_effect_tools: Collection[str] = (),
        allow_broken_chain: bool = False,
        **kw: Any,
    ) -> CtxadminSaver:
        saver = cls(
            Client(base_url, api_key, **kw),
            serde=serde,
            side_effect_tools=side_effect_tools,
            allow_broken_chain=allow_broken_chain,
        )
        saver._async_client = AsyncClient(base_url, api_key, **kw)
        return saver

    # --- transport -------------------------------------------------------------------------

    def _sync_client(self) -> Client:
        """The sync path's client: the one given, else one with the async client's endpoint
        (URL, key, timeout, retries)."""
        if self._client is None:
            assert self._async_client is not None
            endpoint = self._async_client._http.endpoint
            self._client = Client(
                endpoint.base_url,
                endpoint.api_key,
                timeout=endpoint.timeout,
                retries=endpoint.retries,
            )
        return self._client

    def _run(self, operation: Operation[T]) -> T:
        return self._sync_client()._run(operation)

    async def _arun(self, operation: Operation[T]) -> T:
        if self._async_client is None:
            return await asyncio.to_thread(self._run, operation)
        return await self._async_client._run(operation)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.close()
        self.close()

    # --- operations, written once for both ---------------------------------------------------

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Operation[RunnableConfig]:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = str(configurable.get("checkpoint_ns") or "")
        values = checkpoint["channel_values"]
        blobs: list[dict[str, Any]] = []
        mirrored: tuple[str, str, Any] | None = None
        for channel, version in new_versions.items():
            if channel not in values:
                blobs.append(
                    {"channel": channel, "version": str(version), "type": "empty", "data": ""}
                )
            elif channel == MESSAGES_CHANNEL and checkpoint_ns == "":
                mirrored = (channel, str(version), values[channel])
            else:
                blobs.append(self._blob(channel, version, values[channel]))
        body: dict[str, Any] = {
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": configurable.get("checkpoint_id") or "",
            "checkpoint": {k: v for k, v in checkpoint.items() if k != "channel_values"},
            "metadata": get_serializable_checkpoint_metadata(config, metadata),
        }
        path = _api.thread_path(thread_id, "langgraph", "checkpoints")
        with self._lock:
            self._putting[thread_id] = self._putting.get(thread_id, 0) + 1
        try:
            return (
                yield from self._put_send(thread_id, checkpoint_ns, path, body, blobs, mirrored)
            )
        finally:
            with self._lock:
                self._putting[thread_id] -= 1
                self._put_ended[thread_id] = time.monotonic()

    def _put_send(
        self,
        thread_id: str,
        checkpoint_ns: str,
        path: str,
        body: dict[str, Any],
        blobs: list[dict[str, Any]],
        mirrored: tuple[str, str, Any] | None,
    ) -> Operation[RunnableConfig]:
        head = None
        if mirrored is not None:
            with self._lock:
                head = self._heads.get(thread_id)
            if head is not None and not head.base_of(mirrored[2]):
                head = None
        # The messages after the head the server holds (O(new messages)), else all of them by
        # id and digest; `everything`: with every JSON form; `as_bytes`: the server cannot
        # mirror these messages, store the channel as bytes.
        found = self._found(mirrored, head)
        if found is None and head is not None:
            head, found = None, self._found(mirrored, None)
        everything, as_bytes = False, found is None
        while True:
            body["values"] = list(blobs)
            body["messages"] = None
            if mirrored is not None:
                channel, version, value = mirrored
                if as_bytes or found is None:
                    body["values"].append(self._blob(channel, version, value))
                else:
                    body["messages"] = {
                        "channel": channel,
                        "version": version,
                        "entries": self._entries(thread_id, found[0], everything=everything),
                        "side_effect_tools": self.side_effect_tools,
                    }
                    if head is not None:
                        body["messages"]["base_version"] = head.version
                        body["messages"]["base_count"] = len(head.messages)
            try:
                yield Call("POST", path, json=body)
            except CtxadminError as exc:
                if as_bytes:
                    raise
                if exc.code == "messages_base_unknown" and head is not None:
                    head, found = None, self._found(mirrored, None)
                    as_bytes = found is None
                    continue
                if exc.code == "messages_missing" and not everything:
                    everything = True
                    continue
                if exc.code == "messages_not_mirrored":
                    raise _mirror_conflict(exc) from exc
                raise
            break
        with self._lock:
            self._stored_add(thread_id, body["checkpoint_id"])
            if mirrored is not None:
                if as_bytes or found is None:
                    self._heads.pop(thread_id, None)
                else:
                    entries, calls, answered = found
                    self._remember(thread_id, entries)
                    self._heads[thread_id] = _Head(mirrored[1], tuple(mirrored[2]), calls, answered)
        return _config(thread_id, checkpoint_ns, body["checkpoint_id"])

    def _stored_add(self, thread_id: str, checkpoint_id: str) -> None:
        """Note that the server holds this checkpoint (the caller holds the lock)."""
        stored = self._stored.setdefault(thread_id, {})
        stored[checkpoint_id] = None
        while len(stored) > STORED_KEPT:
            del stored[next(iter(stored))]

    @staticmethod
    def _ids_awaited(values: Sequence[Sequence[BaseMessage]]) -> Operation[None]:
        """Wait a moment for messages without an id (a ToolNode's) to get theirs: LangGraph's
        `add_messages` gives them one, in place, when it applies the write, which it does
        while the write is being sent. Without an id a message cannot be mirrored, and the write
        goes as bytes."""
        deadline = time.monotonic() + ID_WAIT_S
        while any(not m.id for value in values for m in value) and time.monotonic() < deadline:
            yield Sleep(PUT_POLL_S)

    def _put_awaited(self, thread_id: str, checkpoint_id: str) -> Operation[None]:
        """Wait (a little) until the checkpoint a write follows is stored, while this saver is
        putting to the thread: the server appends a write's messages to the log only right
        after its checkpoint's, so that the log keeps the conversation's order."""
        deadline = time.monotonic() + PUT_WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                if checkpoint_id in self._stored.get(thread_id, {}):
                    return
                busy = self._putting.get(thread_id, 0) > 0
                ended = self._put_ended.get(thread_id)
            if not busy and (ended is None or time.monotonic() - ended > PUT_GAP_S):
                return  # no put of it coming from here: the server decides
            yield Sleep(PUT_POLL_S)

    @staticmethod
    def _found(
        mirrored: tuple[str, str, Any] | None, head: _Head | None
    ) -> tuple[list[Entry], frozenset[str], frozenset[str]] | None:
        """The entries to send for the mirrored channel: after `head` when given, else all."""
        if mirrored is None:
            return None
        value = mirrored[2]
        if head is None:
            return _mirrorable(value)
        if not isinstance(value, list):
            return None
        return _mirrorable(value[len(head.messages) :], head.calls, head.answered)

    def _remember(self, thread_id: str, entries: Sequence[Entry]) -> None:
        """Note that the thread's log holds these messages (the caller holds the lock)."""
        known = self._mirrored.setdefault(thread_id, {})
        known.update((message_id, digest) for message_id, digest, _ in entries)

    def _blob(self, channel: str, version: Any, value: Any) -> dict[str, Any]:
        type_, data = self.serde.dumps_typed(value)
        return {"channel": channel, "version": str(version), "type": type_, "data": _b64(data)}

    def _entries(
        self, thread_id: str, entries: Sequence[Entry], *, everything: bool
    ) -> list[dict[str, Any]]:
        with self._lock:
            known = dict(self._mirrored.get(thread_id, {}))
        return [
            {"id": message_id, "digest": digest}
            if not everything and known.get(message_id) == digest
            else {"id": message_id, "digest": digest, "message": form}
            for message_id, digest, form in entries
        ]

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Operation[None]:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = str(configurable.get("checkpoint_ns") or "")
        interrupts: list[dict[str, Any]] = []
        # A write of messages to the mirrored channel goes as their JSON forms, which the server
        # mirrors into the log (the tool calls it answers are checked there): no second copy.
        candidates = []
        for idx, (channel, value) in enumerate(writes):
            if channel == INTERRUPT:
                # Beside the bytes, as plain JSON: the server opens an approval request from it
                # and never decodes serialised values.
                interrupts.extend(
                    {"id": str(item.id), "value": _plain(item.value)}
                    for item in (value if isinstance(value, list | tuple) else [value])
                    if isinstance(item, Interrupt)
                )
            elif channel == MESSAGES_CHANNEL and checkpoint_ns == "" and isinstance(value, list):
                if value and all(isinstance(m, BaseMessage) for m in value):
                    candidates.append(idx)
        if candidates:
            yield from self._put_awaited(thread_id, str(configurable["checkpoint_id"]))
            yield from self._ids_awaited([writes[idx][1] for idx in candidates])
        mirrored: dict[int, list[Entry]] = {}
        for idx in candidates:
            found = _mirrorable(writes[idx][1], calls=None)
            if found is not None and found[0]:
                mirrored[idx] = found[0]
        as_bytes = not mirrored
        while True:
            body_writes = []
            for idx, (channel, value) in enumerate(writes):
                # Special channels (error, interrupt, resume...) have fixed negative indexes.
                item: dict[str, Any] = {"idx": WRITES_IDX_MAP.get(channel, idx), "channel": channel}
                if idx in mirrored and not as_bytes:
                    item["messages"] = [
                        {"id": message_id, "digest": digest, "message": form}
                        for message_id, digest, form in mirrored[idx]
                    ]
                else:
                    type_, data = self.serde.dumps_typed(value)
                    item.update(type=type_, data=_b64(data))
                body_writes.append(item)
            body: dict[str, Any] = {
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": configurable["checkpoint_id"],
                "task_id": task_id,
                "task_path": task_path,
                "writes": body_writes,
                "interrupts": interrupts,
            }
            if not as_bytes:
                body["side_effect_tools"] = self.side_effect_tools
            try:
                yield Call("POST", _api.thread_path(thread_id, "langgraph", "writes"), json=body)
            except CtxadminError as exc:
                if not as_bytes and exc.code == "messages_not_mirrored":
                    raise _mirror_conflict(exc) from exc
                if not as_bytes and exc.code == "messages_unordered":
                    # Not yet in the conversation's order (the checkpoint it follows is still
                    # on its way): the next put mirrors these messages with the list.
                    as_bytes = True
                    continue
                raise
            break
        if not as_bytes:
            with self._lock:
                for entries in mirrored.values():
                    self._remember(thread_id, entries)

    def _get_tuple(self, config: RunnableConfig) -> Operation[CheckpointTuple | None]:
        configurable = config["configurable"]
        checkpoint_id = get_checkpoint_id(config) or "latest"
        try:
            answer = yield Call(
                "GET",
                _api.thread_path(
                    str(configurable["thread_id"]),
                    "langgraph",
                    "checkpoints",
                    quote(str(checkpoint_id), safe=""),
                ),
                params={"checkpoint_ns": str(configurable.get("checkpoint_ns") or "")},
            )
        except NotFoundError:
            return None
        if not self.allow_broken_chain:
            chain_check(answer.get("integrity"), f"checkpoint {answer['checkpoint_id']}")
        found = self._tuple(answer)
        messages = answer["messages"].get(MESSAGES_CHANNEL)
        version = answer["checkpoint"].get("channel_versions", {}).get(MESSAGES_CHANNEL)
        if answer["checkpoint_ns"] == "" and messages is not None and version is not None:
            # The decoded messages (without a repair note) are a base the next put can build on.
            note_id = f"{REPAIR_NOTE_PREFIX}{answer['checkpoint_id']}"
            decoded = found.checkpoint["channel_values"][MESSAGES_CHANNEL]
            if len(decoded) > len(messages):
                decoded = [m for m in decoded if getattr(m, "id", None) != note_id]
            head = _head_of(str(version), decoded[: len(messages)])
            with self._lock:
                self._heads[str(answer["thread_id"])] = head
        with self._lock:
            self._stored_add(str(answer["thread_id"]), str(answer["checkpoint_id"]))
        # Exactly once: a call the ledger already holds is not run again (docs/design.md §15).
        return ledger_apply(found, answer, self.serde, _note_position)

    def _page(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int,
        page_after: str | None,
    ) -> Call:
        configurable = (config or {}).get("configurable", {})
        thread_id = configurable.get("thread_id")
        path = (
            _api.thread_path(str(thread_id), "langgraph", "checkpoints")
            if thread_id is not None
            else f"{_api.API}/langgraph/checkpoints/"
        )
        checkpoint_ns = configurable.get("checkpoint_ns")
        params: dict[str, Any] = {"limit": limit, "page_after": page_after}
        if checkpoint_ns is not None:
            params["checkpoint_ns"] = str(checkpoint_ns)
        if config is not None and get_checkpoint_id(config):
            params["checkpoint_id"] = get_checkpoint_id(config)
        if before is not None:
            params["before"] = get_checkpoint_id(before)
        if filter:
            params["filter"] = json.dumps(filter)
        return Call("GET", path, params=params)

    def _tuple(self, answer: Mapping[str, Any]) -> CheckpointTuple:
        values: dict[str, Any] = {}
        for value in answer["values"]:
            if value["type"] != "empty":
                values[value["channel"]] = self.serde.loads_typed(
                    (value["type"], base64.b64decode(value["data"]))
                )
        for channel, forms in answer["messages"].items():
            values[channel] = messages_from_dict(forms)
        repair = (answer.get("metadata") or {}).get(REPAIR_KEY)
        if isinstance(repair, dict) and repair.get("side_effects"):
            _repair_note_add(values, answer["checkpoint_id"], repair["side_effects"])
        checkpoint: Any = {**answer["checkpoint"], "channel_values": values}
        thread_id, checkpoint_ns = answer["thread_id"], answer["checkpoint_ns"]
        parent = answer.get("parent_checkpoint_id")
        return CheckpointTuple(
            config=_config(thread_id, checkpoint_ns, answer["checkpoint_id"]),
            checkpoint=checkpoint,
            metadata=answer["metadata"],
            parent_config=_config(thread_id, checkpoint_ns, parent) if parent else None,
            pending_writes=[
                (
                    write["task_id"],
                    write["channel"],
                    messages_from_dict(write["messages"])
                    if "messages" in write
                    else self.serde.loads_typed((write["type"], base64.b64decode(write["data"]))),
                )
                for write in answer["writes"]
            ],
        )

    def _resume(
        self, config: RunnableConfig, timeout: float | None, poll_interval: float
    ) -> Operation[Command | None]:
        """The decisions on the head's pending interrupts, read back from the approval requests
        their writes opened; None while one is undecided after `timeout` seconds (or at once
        when None), or when nothing is pending."""
        head = yield from self._get_tuple(config)
        pending = [
            str(item.id)
            for _, channel, value in (head.pending_writes or [] if head is not None else [])
            if channel == INTERRUPT
            for item in (value if isinstance(value, list | tuple) else [value])
            if isinstance(item, Interrupt)
        ]
        if not pending:
            return None
        thread_id = str(config["configurable"]["thread_id"])
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            records = yield _api.approvals(thread_id)
            decided = {
                str(record["arguments"].get("interrupt_id")): {
                    "approved": record["status"] == "approved",
                    "reason": record.get("reason", ""),
                    "decided_by": record.get("decided_by"),
                }
                for record in records
                if record.get("action") == INTERRUPT_ACTION
                and record.get("status") != "pending"
                and isinstance(record.get("arguments"), dict)
            }
            if all(interrupt_id in decided for interrupt_id in pending):
                if len(pending) == 1:
                    return Command(resume=decided[pending[0]])
                return Command(resume={i: decided[i] for i in pending})
            left = None if deadline is None else deadline - time.monotonic()
            if left is None or left <= 0:
                return None
            yield Sleep(min(poll_interval, left))

    def resume_command(
        self, config: RunnableConfig, *, timeout: float | None = None, poll_interval: float = 2.0
    ) -> Command | None:
        """What to resume a graph paused on `interrupt()` with: each interrupt opened an
        approval request in ctxadmin (action `langgraph.interrupt`), and a reviewer's decision
        comes back as `Command(resume={"approved": bool, "reason": str, "decided_by": str})`
        (a map by interrupt id when several are pending). None when nothing is pending, or a
        decision is still missing after `timeout` seconds (None: do not wait).

            command = saver.resume_command(config, timeout=600)
            if command is not None:
                graph.invoke(command, config)
        """
        return self._run(self._resume(config, timeout, poll_interval))

    async def aresume_command(
        self, config: RunnableConfig, *, timeout: float | None = None, poll_interval: float = 2.0
    ) -> Command | None:
        return await self._arun(self._resume(config, timeout, poll_interval))

    def _copy(self, source_thread_id: str, target_thread_id: str) -> Call:
        return Call(
            "POST",
            _api.thread_path(str(source_thread_id), "langgraph", "copy"),
            json={"target_thread_id": str(target_thread_id)},
        )

    @staticmethod
    def _prune(thread_ids: Sequence[str], strategy: str) -> Call:
        return Call(
            "POST",
            f"{_api.API}/langgraph/prune/",
            json={"thread_ids": [str(t) for t in thread_ids], "strategy": strategy},
        )

    @staticmethod
    def _delete_for_runs(run_ids: Sequence[str]) -> Call:
        return Call(
            "POST", f"{_api.API}/langgraph/delete-for-runs/", json={"run_ids": list(run_ids)}
        )

    @staticmethod
    def _delete_thread(thread_id: str) -> Call:
        return Call("DELETE", _api.thread_path(str(thread_id), "langgraph"))

    # --- exactly once inside a run: a ToolNode's tool-call guard ------------------------------

    def _ledger_call(self, request: Any) -> Operation[dict[str, Any] | None]:
        """The ledger's record of the request's call, as the thread's latest checkpoint read
        answers it (None when it holds nothing of it)."""
        config = getattr(getattr(request, "runtime", None), "config", None) or {}
        thread_id = (config.get("configurable") or {}).get("thread_id")
        if thread_id is None:
            return None
        try:
            answer = yield Call(
                "GET",
                _api.thread_path(str(thread_id), "langgraph", "checkpoints", "latest"),
                params={"checkpoint_ns": ""},
            )
        except NotFoundError:
            return None
        ledger = answer.get("ledger") or {}
        call_id = str(request.tool_call.get("id"))
        return next(
            (c for c in ledger.get("calls") or [] if str(c.get("tool_call_id")) == call_id), None
        )

    def tool_call_guard(self, request: Any, execute: Any) -> Any:
        """A `ToolNode(wrap_tool_call=...)` guard: a call of a side-effecting tool that the
        ledger already holds is not run again inside a run either (e.g. after a rollback, a
        node between the restored state and the tool node): its recorded result is returned
        instead, and an unknown outcome raises `SideEffectPending`.

            ToolNode(tools, wrap_tool_call=saver.tool_call_guard,
                     awrap_tool_call=saver.atool_call_guard)
        """
        if request.tool_call.get("name") not in self.side_effect_tools:
            return execute(request)
        recorded = guard_decision(self._run(self._ledger_call(request)))
        return execute(request) if recorded is None else recorded

    async def atool_call_guard(self, request: Any, execute: Any) -> Any:
        """`tool_call_guard` for `ToolNode(awrap_tool_call=...)`."""
        if request.tool_call.get("name") not in self.side_effect_tools:
            return await execute(request)
        recorded = guard_decision(await self._arun(self._ledger_call(request)))
        return await execute(request) if recorded is None else recorded

    # --- BaseCheckpointSaver, sync -----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        left, page_after = limit, None
        while left is None or left > 0:
            size = PAGE if left is None else min(PAGE, left)
            answer = self._run(one(self._page(config, filter, before, size, page_after)))
            for item in answer["checkpoints"]:
                yield self._tuple(item)
            if left is not None:
                left -= len(answer["checkpoints"])
            page_after = answer["next"]
            if page_after is None:
                return

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run(one(self._delete_thread(thread_id)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(one(self._copy(source_thread_id, target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if thread_ids:
            self._run(one(self._prune(thread_ids, strategy)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            self._run(one(self._delete_for_runs(run_ids)))

    # --- BaseCheckpointSaver, async ----------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        left, page_after = limit, None
        while left is None or left > 0:
            size = PAGE if left is None else min(PAGE, left)
            call = self._page(config, filter, before, size, page_after)
            answer = await self._arun(one(call))
            for item in answer["checkpoints"]:
                yield self._tuple(item)
            if left is not None:
                left -= len(answer["checkpoints"])
            page_after = answer["next"]
            if page_after is None:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._arun(self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._arun(self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(one(self._delete_thread(thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(one(self._copy(source_thread_id, target_thread_id)))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if thread_ids:
            await self._arun(one(self._prune(thread_ids, strategy)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self._arun(one(self._delete_for_runs(run_ids)))

    # --- versions ------------------------------------------------------------------------

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """`<counter, 10 digits>.<32 random bits, hex>`: the counter orders versions, the random
        part keeps two writers' versions apart, as LangGraph's own savers do. Shorter than
        theirs (32 digits and a float): a checkpoint repeats every version several times. It
        still sorts after a 32-digit version of a lower counter (whose first 10 digits are
        zeros), so a thread stored with those versions goes on."""
        if current is None:
            counter = 0
        elif isinstance(current, int | float):
            counter = int(current)
        else:
            counter = int(str(current).split(".")[0])
        return f"{counter + 1:010}.{random.getrandbits(32):08x}"
