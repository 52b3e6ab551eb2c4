"""Reading checkpoints for `CtxadminSaver`: a checkpoint (its values decoded, its messages
from the log, a rollback's note added, the ledger's word on the calls it leaves open), a page
of them, the ledger's record of one call, and the decisions on pending interrupts."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from langchain_core.messages import messages_from_dict
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, copy_checkpoint, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.types import Command, Interrupt

from ctxadmin_client import _api
from ctxadmin_client._http import NOT_MODIFIED, Call, Operation, Sleep
from ctxadmin_client._langgraph_ledger import ledger_apply
from ctxadmin_client._langgraph_messages import (
    MESSAGES_CHANNEL,
    REPAIR_KEY,
    REPAIR_NOTE_PREFIX,
    Head,
    config_of,
    head_of,
    note_position,
    repair_note_add,
)
from ctxadmin_client._langgraph_write import INTERRUPT, stored_add
from ctxadmin_client.errors import NotFoundError, chain_check

INTERRUPT_ACTION = "langgraph.interrupt"
RESTORED_KEPT = 64  # the last reads kept, with their validators, for conditional restores


def _fresh(found: CheckpointTuple) -> CheckpointTuple:
    """A held tuple as a new one: its dicts copied (LangGraph may change what it is given),
    its values and messages shared."""
    checkpoint = copy_checkpoint(found.checkpoint)
    return found._replace(
        checkpoint=checkpoint,
        metadata=found.metadata.copy(),
        pending_writes=list(found.pending_writes or []),
    )


PAGE = 100  # the server's largest page of checkpoints


class Pages:
    """Paging through a list of checkpoints, `limit` of them at most (None: all), without I/O:
    ask for `size` after `after` while `more`; `took` each answer for its checkpoints."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit
        self.after: str | None = None
        self.more = limit is None or limit > 0

    @property
    def size(self) -> int:
        return PAGE if self.left is None else min(PAGE, self.left)

    def took(self, answer: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        checkpoints: list[Mapping[str, Any]] = answer["checkpoints"]
        if self.left is not None:
            self.left -= len(checkpoints)
        self.after = answer["next"]
        self.more = self.after is not None and (self.left is None or self.left > 0)
        return checkpoints


class CheckpointReads:
    """The saver's reads, as operations (a mixin of `CtxadminSaver`, which holds the state)."""

    serde: SerializerProtocol
    allow_broken_chain: bool
    _lock: threading.Lock
    _heads: dict[str, Head]
    _stored: dict[str, dict[str, None]]
    # (thread, ns, checkpoint id or "latest") -> the validator and tuple of its last read
    _restored: dict[tuple[str, str, str], tuple[str, CheckpointTuple]]

    def _get_tuple(self, config: RunnableConfig) -> Operation[CheckpointTuple | None]:
        configurable = config["configurable"]
        checkpoint_id = get_checkpoint_id(config) or "latest"
        key = (
            str(configurable["thread_id"]),
            str(configurable.get("checkpoint_ns") or ""),
            str(checkpoint_id),
        )
        with self._lock:
            held = self._restored.get(key)
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
                headers={"If-None-Match": held[0]} if held is not None else None,
            )
        except NotFoundError:
            with self._lock:
                self._restored.pop(key, None)
            return None
        if answer is NOT_MODIFIED and held is not None:
            return _fresh(held[1])  # the same answer as the last read: decoded already
        result = self._tuple_read(answer)
        validator = answer.get("validator")
        if validator and result is not None:
            with self._lock:
                self._restored[key] = (validator, result)
                while len(self._restored) > RESTORED_KEPT:
                    del self._restored[next(iter(self._restored))]
        return _fresh(result) if result is not None else None

    def _tuple_read(self, answer: dict[str, Any]) -> CheckpointTuple | None:
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
            head = head_of(str(version), decoded[: len(messages)])
            with self._lock:
                self._heads[str(answer["thread_id"])] = head
        with self._lock:
            stored_add(self._stored, str(answer["thread_id"]), str(answer["checkpoint_id"]))
        # Exactly once: a call the ledger already holds is not run again (docs/langgraph.md,
        # "Agent frameworks").
        return ledger_apply(found, answer, self.serde, note_position)

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
            repair_note_add(values, answer["checkpoint_id"], repair["side_effects"])
        checkpoint: Any = {**answer["checkpoint"], "channel_values": values}
        thread_id, checkpoint_ns = answer["thread_id"], answer["checkpoint_ns"]
        parent = answer.get("parent_checkpoint_id")
        return CheckpointTuple(
            config=config_of(thread_id, checkpoint_ns, answer["checkpoint_id"]),
            checkpoint=checkpoint,
            metadata=answer["metadata"],
            parent_config=config_of(thread_id, checkpoint_ns, parent) if parent else None,
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
