"""Writing checkpoints for `CtxadminSaver`: a put (the channel values as bytes, the messages
channel as the messages after the head the server holds) and a put of pending writes (a write
of messages as their JSON forms), each an operation of the one request driver that answers
the server's refusals (`messages_base_unknown`, `messages_missing`, `messages_unordered`) by
sending again in the form it asks for."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.types import Interrupt

from ctxadmin_client import _api
from ctxadmin_client._http import Call, Operation, Sleep
from ctxadmin_client._langgraph_messages import (
    MESSAGES_CHANNEL,
    Entry,
    Head,
    b64,
    config_of,
    mirror_conflict,
    mirrorable,
    plain,
)
from ctxadmin_client.errors import CtxadminError

INTERRUPT = "__interrupt__"  # LangGraph's channel of interrupt() writes
STORED_KEPT = 32  # checkpoint ids remembered per thread
# How long a write of messages waits for its checkpoint's put (LangGraph sends both from
# background threads, so the write may come first), and the pause between looks.
PUT_WAIT_S = 2.0
PUT_GAP_S = 0.05  # after a put ends, the next one may not have started yet
PUT_POLL_S = 0.002
ID_WAIT_S = 0.05  # how long a write waits for LangGraph to give its messages ids


def stored_add(stored: dict[str, dict[str, None]], thread_id: str, checkpoint_id: str) -> None:
    """Note that the server holds this checkpoint (the caller holds the saver's lock)."""
    kept = stored.setdefault(thread_id, {})
    kept[checkpoint_id] = None
    while len(kept) > STORED_KEPT:
        del kept[next(iter(kept))]


def _target(config: RunnableConfig) -> tuple[dict[str, Any], str, str]:
    """A write's config, and the thread and checkpoint namespace it names."""
    configurable = config["configurable"]
    return (
        configurable,
        str(configurable["thread_id"]),
        str(configurable.get("checkpoint_ns") or ""),
    )


class CheckpointWrites:
    """The saver's puts, as operations (a mixin of `CtxadminSaver`, which holds the state)."""

    serde: SerializerProtocol
    side_effect_tools: list[str]
    _lock: threading.Lock
    _mirrored: dict[str, dict[str, str]]
    _heads: dict[str, Head]
    _stored: dict[str, dict[str, None]]
    _putting: dict[str, int]
    _put_ended: dict[str, float]

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Operation[RunnableConfig]:
        configurable, thread_id, checkpoint_ns = _target(config)
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
            if mirrored is not None and not as_bytes and found is not None:
                # Known before the answer: a put queued behind this one (pipelined, the same
                # batch) builds on it; were it refused, the server says so to that put too.
                with self._lock:
                    self._heads[thread_id] = Head(
                        mirrored[1], tuple(mirrored[2]), found[1], found[2]
                    )
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
                    raise mirror_conflict(exc) from exc
                raise
            break
        with self._lock:
            stored_add(self._stored, thread_id, body["checkpoint_id"])
            if mirrored is not None:
                if as_bytes or found is None:
                    self._heads.pop(thread_id, None)
                else:
                    entries, calls, answered = found
                    self._remember(thread_id, entries)
                    self._heads[thread_id] = Head(mirrored[1], tuple(mirrored[2]), calls, answered)
        return config_of(thread_id, checkpoint_ns, body["checkpoint_id"])

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
        mirrored: tuple[str, str, Any] | None, head: Head | None
    ) -> tuple[list[Entry], frozenset[str], frozenset[str]] | None:
        """The entries to send for the mirrored channel: after `head` when given, else all."""
        if mirrored is None:
            return None
        value = mirrored[2]
        if head is None:
            return mirrorable(value)
        if not isinstance(value, list):
            return None
        return mirrorable(value[len(head.messages) :], head.calls, head.answered)

    def _remember(self, thread_id: str, entries: Sequence[Entry]) -> None:
        """Note that the thread's log holds these messages (the caller holds the lock)."""
        known = self._mirrored.setdefault(thread_id, {})
        known.update((message_id, digest) for message_id, digest, _ in entries)

    def _blob(self, channel: str, version: Any, value: Any) -> dict[str, Any]:
        type_, data = self.serde.dumps_typed(value)
        return {"channel": channel, "version": str(version), "type": type_, "data": b64(data)}

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
        *,
        ordered: bool = False,
    ) -> Operation[None]:
        """`ordered`: sent after every put this saver was given before it (pipelined), so
        no wait for its checkpoint's put."""
        configurable, thread_id, checkpoint_ns = _target(config)
        interrupts: list[dict[str, Any]] = []
        # A write of messages to the mirrored channel goes as their JSON forms, which the server
        # mirrors into the log (the tool calls it answers are checked there): no second copy.
        candidates = []
        for idx, (channel, value) in enumerate(writes):
            if channel == INTERRUPT:
                # Beside the bytes, as plain JSON: the server opens an approval request from it
                # and never decodes serialised values.
                interrupts.extend(
                    {"id": str(item.id), "value": plain(item.value)}
                    for item in (value if isinstance(value, list | tuple) else [value])
                    if isinstance(item, Interrupt)
                )
            elif channel == MESSAGES_CHANNEL and checkpoint_ns == "" and isinstance(value, list):
                if value and all(isinstance(m, BaseMessage) for m in value):
                    candidates.append(idx)
        if candidates:
            if not ordered:
                yield from self._put_awaited(thread_id, str(configurable["checkpoint_id"]))
            yield from self._ids_awaited([writes[idx][1] for idx in candidates])
        mirrored: dict[int, list[Entry]] = {}
        for idx in candidates:
            found = mirrorable(writes[idx][1], calls=None)
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
                    item.update(type=type_, data=b64(data))
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
                    raise mirror_conflict(exc) from exc
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
