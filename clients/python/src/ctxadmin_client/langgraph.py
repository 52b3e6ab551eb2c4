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
import random
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.types import Command

from ctxadmin_client import _api
from ctxadmin_client._http import Call, Operation, one
from ctxadmin_client._http import nodelay_transport as nodelay_transport  # bench/storage.py's
from ctxadmin_client._langgraph_ledger import guard_decision
from ctxadmin_client._langgraph_messages import Head, config_of
from ctxadmin_client._langgraph_pipeline import (
    Pending,
    Pipeline,
    batch_operation,
    in_run,
    loop_of,
    pipelined,
)
from ctxadmin_client._langgraph_read import CheckpointReads, Pages
from ctxadmin_client._langgraph_write import CheckpointWrites
from ctxadmin_client.async_client import AsyncClient
from ctxadmin_client.client import Client

__all__ = ["CtxadminSaver"]

T = TypeVar("T")


class CtxadminSaver(CheckpointReads, CheckpointWrites, BaseCheckpointSaver[str]):
    """LangGraph's `BaseCheckpointSaver` over ctxadmin's REST API, sync and async.

    Args:
        client: a `Client` (the sync methods use it; the async ones run it in a worker thread
            unless an `AsyncClient` is also at hand) or an `AsyncClient` (the async methods use
            it; the sync ones a `Client` made with the same URL, key, timeout and retries).
        serde: LangGraph's serializer for channel values and writes (its default when None).
        side_effect_tools: names of the tools whose calls are side effects: their `tool_call`
            events say so (with the tool call id as idempotency key), so a rollback lists them,
            and the side-effect ledger drives resume: a call it holds is never run again
            (`get_tuple` hands back its recorded result, or raises `SideEffectPending` while
            its outcome is unknown; docs/clients.md, "Exactly once with LangGraph").
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
        self._heads: dict[str, Head] = {}
        # thread_id -> the checkpoint ids it is known to hold (the latest few), the puts under
        # way, and when the last one ended: a write of messages waits for its checkpoint's put
        self._stored: dict[str, dict[str, None]] = {}
        self._putting: dict[str, int] = {}
        self._put_ended: dict[str, float] = {}
        self._lock = threading.Lock()
        self._pipeline = Pipeline(self._send_batch, self._known_stored)
        self._restored: dict[tuple[str, str, str], tuple[str, CheckpointTuple]] = {}
        # LangGraph runs that have a drain of this saver's queue among their tasks
        self._draining: weakref.WeakSet[Any] = weakref.WeakSet()
        # thread_id -> the run whose put came last: a write after it (a task's error, the run's
        # last write) makes that run drain too
        self._runs: dict[str, weakref.ref[Any]] = {}

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
        self._pipeline.flush()  # every request after the pipelined writes before it
        return self._sync_client()._run(operation)

    async def _arun(self, operation: Operation[T]) -> T:
        await self._aflush()
        if self._async_client is None:
            return await asyncio.to_thread(self._run, operation)
        return await self._async_client._run(operation)

    async def _aflush(self) -> None:
        if not self._pipeline.idle():
            await asyncio.to_thread(self._pipeline.flush)

    def flush(self) -> None:
        """Wait until every pipelined put and write is stored; raise the error of one that
        failed (docs/langgraph.md, "Pipelined writes"). Reads and `close` flush first."""
        self._pipeline.flush()

    async def aflush(self) -> None:
        await self._aflush()

    def close(self) -> None:
        try:
            self._pipeline.close()
        finally:
            if self._client is not None:
                self._client.close()

    async def aclose(self) -> None:
        await self._aflush()
        if self._async_client is not None:
            await self._async_client.close()
        self.close()

    # --- pipelined writes --------------------------------------------------------------------

    def _known_stored(self, thread_id: str, checkpoint_id: str) -> bool:
        # Read without the lock (the pipeline's is held): a membership test of a dict.
        return checkpoint_id in self._stored.get(thread_id, {})

    def _send_batch(self, thread_id: str, items: list[Pending]) -> None:
        """The sender's: a thread's queued puts and writes, as one request."""
        path = _api.thread_path(thread_id, "langgraph", "batch")
        self._sync_client()._run(batch_operation(path, items))

    def _drain_at_end(self, loop: Any, asynchronous: bool = False) -> None:
        """Make the run `loop` wait, when it ends, until this saver's queue is stored: one
        drain task per run at a time (LangGraph waits for its tasks at a run's end)."""
        if loop is None:
            return
        with self._lock:
            if loop in self._draining:
                return
            self._draining.add(loop)
        try:
            if asynchronous:
                loop.submit(self._adrain, loop)
            else:
                loop.submit(self._drain, loop)
        except RuntimeError:  # that run has ended (its executor shut down): nothing to hold
            with self._lock:
                self._draining.discard(loop)

    def _run_of(self, config: RunnableConfig, frame: Any) -> Any:
        """The LangGraph run a put is part of (remembered for the writes after it), or the one
        of a write's thread's last put."""
        thread_id = str(config["configurable"]["thread_id"])
        loop = loop_of(frame)
        with self._lock:
            if loop is not None:
                self._runs[thread_id] = weakref.ref(loop)
                return loop
            last = self._runs.get(thread_id)
        return last() if last is not None else None

    def _drain(self, loop: Any) -> None:
        try:
            while True:
                self._pipeline.flush()
                with self._lock:
                    if self._pipeline.idle():
                        self._draining.discard(loop)
                        return
        except BaseException:
            with self._lock:
                self._draining.discard(loop)
            raise

    async def _adrain(self, loop: Any) -> None:
        await asyncio.to_thread(self._drain, loop)

    def _queue_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[Pending, RunnableConfig]:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        item = self._pipeline.submit(
            Pending(
                thread_id,
                "put",
                str(checkpoint["id"]),
                lambda: self._put(config, checkpoint, metadata, new_versions),
            )
        )
        ns = str(configurable.get("checkpoint_ns") or "")
        return item, config_of(thread_id, ns, checkpoint["id"])

    def _queue_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Pending:
        configurable = config["configurable"]
        writes = list(writes)
        return self._pipeline.submit(
            Pending(
                str(configurable["thread_id"]),
                "writes",
                str(configurable["checkpoint_id"]),
                lambda: self._put_writes(config, writes, task_id, task_path, ordered=True),
                put_follows=pipelined(config),
            )
        )

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
        pages = Pages(limit)
        while pages.more:
            answer = self._run(one(self._page(config, filter, before, pages.size, pages.after)))
            for item in pages.took(answer):
                yield self._tuple(item)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        item, stored = self._queue_put(config, checkpoint, metadata, new_versions)
        if in_run(config):
            self._drain_at_end(self._run_of(config, sys._getframe(1)))
        if not pipelined(config):
            self._pipeline.wait(item)
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        item = self._queue_writes(config, writes, task_id, task_path)
        if not in_run(config):
            self._pipeline.wait(item)
        else:
            self._drain_at_end(self._run_of(config, None))

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
        pages = Pages(limit)
        while pages.more:
            call = self._page(config, filter, before, pages.size, pages.after)
            for item in pages.took(await self._arun(one(call))):
                yield self._tuple(item)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        item, stored = self._queue_put(config, checkpoint, metadata, new_versions)
        if in_run(config):
            self._drain_at_end(self._run_of(config, sys._getframe(1)), asynchronous=True)
        if not pipelined(config):
            await asyncio.to_thread(self._pipeline.wait, item)
        return stored

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        item = self._queue_writes(config, writes, task_id, task_path)
        if not in_run(config):
            await asyncio.to_thread(self._pipeline.wait, item)
        else:
            self._drain_at_end(self._run_of(config, None), asynchronous=True)

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
