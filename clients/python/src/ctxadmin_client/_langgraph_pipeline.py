"""Pipelined writes for `CtxadminSaver` (docs/langgraph.md, "Pipelined writes").

Under LangGraph's `durability="async"` (its default) the loop does not wait for a put: the saver
queues each put and write (in order, at most `DEPTH` of them) and returns; one background
sender takes what is queued for a thread (up to `BATCH` operations) and sends it as one request,
which the server applies in one transaction (`POST .../langgraph/batch/`). Under `"sync"`, and
for a put made outside a LangGraph run, the call waits until its own operation is stored.

The queue is flushed (everything queued stored, or its error raised) before any other request of
the saver — a read (`get_tuple`, `list`), a tool-call guard, a delete — on `close()`, and at the
interpreter's exit. An error of a pipelined write is never dropped: the queued operations of its
thread after it are not sent (the stored state stays a prefix of what the run wrote), and the
error is raised by the saver's next call or flush.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from langchain_core.runnables import RunnableConfig

from ctxadmin_client._http import Call, Operation, Sleep
from ctxadmin_client.errors import CtxadminError

DEPTH = 64  # operations queued at most: a put waits for room beyond
BATCH = 32  # operations in one request at most (the server takes 64)
LINGER_S = 0.005  # how long a batch of writes alone waits for the put that usually follows
# A write whose checkpoint is neither stored nor queued waits for its put when LangGraph's loop
# made it under "async" (the put follows), or while the thread's last put was queued less than
# PUT_GAP_S ago, at most PUT_WAIT_S: the server takes a write's messages only right after its
# checkpoint's.
PUT_GAP_S = 0.05
PUT_WAIT_S = 2.0
EXIT_FLUSH_S = 30.0  # how long the interpreter's exit waits for the queue
log = logging.getLogger("ctxadmin_client.langgraph")

# How LangGraph's loop marks the config it passes a put (`langgraph._internal._constants`):
# the run's runtime is there in every put and write the loop makes, and the durability when
# it is not LangGraph's default, "async".
RUNTIME_KEY = "__pregel_runtime"
DURABILITY_KEY = "__pregel_durability"


def loop_of(frame: FrameType | None) -> Any | None:
    """The LangGraph loop (`PregelLoop`) whose put this is, from the put's caller's frame, or
    None. LangGraph tells a saver nothing when a run ends: under `"async"` it waits at the end
    of a run for the tasks it gave its executor, so the saver gives it one more, the drain, which
    ends when everything queued is stored (and raises there what failed)."""
    if frame is None or frame.f_code.co_name != "_checkpointer_put_after_previous":
        return None
    loop = frame.f_locals.get("self")
    return loop if callable(getattr(loop, "submit", None)) else None


def in_run(config: RunnableConfig) -> bool:
    """Whether LangGraph's loop made this put or write (else: a direct call, answered)."""
    return RUNTIME_KEY in (config.get("configurable") or {})


def pipelined(config: RunnableConfig) -> bool:
    """Whether a put of this config may return before it is stored: LangGraph's loop made it
    under `durability="async"`. A direct call of `put` (no run) waits for its answer. A write
    LangGraph's loop makes never waits (`in_run`): under `"sync"` the loop waits for the put
    after it, which the queue sends after it."""
    configurable = config.get("configurable") or {}
    return RUNTIME_KEY in configurable and configurable.get(DURABILITY_KEY, "async") == "async"


@dataclass(eq=False)
class Pending:
    """One queued put or write: its thread, kind, the checkpoint it stores or follows, and
    how to make its operation (when it is sent, so that ids LangGraph gives messages meanwhile
    are in it)."""

    thread_id: str
    kind: str  # "put" | "writes"
    checkpoint_id: str
    make: Callable[[], Operation[Any]]
    # A write LangGraph's loop made under "async": the put of its checkpoint was handed to
    # the loop's executor before the task ran, so it comes, however late (a loaded machine).
    put_follows: bool = False
    done: bool = False
    error: BaseException | None = field(default=None, repr=False)


def _drive(operation: Operation[Any], step: Call | Sleep) -> Operation[Any]:
    """Go on with an operation from the step it yielded last."""
    try:
        while True:
            if isinstance(step, Sleep):
                yield step
                step = operation.send(None)
                continue
            try:
                answer = yield step
            except CtxadminError as exc:
                step = operation.throw(exc)
                continue
            step = operation.send(answer)
    except StopIteration as done:
        return done.value


def batch_operation(path: str, items: list[Pending]) -> Operation[None]:
    """The operation sending `items` (one thread's) as one batch: each operation's first request
    becomes one of the batch's. When the server refuses one of them (`fields.operation`),
    nothing of the batch was stored: each goes alone then, answering its refusal as it does
    (the whole message list, the forms asked for, bytes)."""
    operations = [item.make() for item in items]
    try:
        firsts: list[Call] = []
        for operation in operations:
            step = next(operation)
            while isinstance(step, Sleep):
                yield step
                step = next(operation)
            firsts.append(step)
        if len(operations) == 1:
            yield from _drive(operations[0], firsts[0])
            return
        try:
            yield Call(
                "POST",
                path,
                json={
                    "operations": [
                        {item.kind: call.json} for item, call in zip(items, firsts, strict=True)
                    ]
                },
            )
        except CtxadminError as exc:
            if "operation" not in exc.fields:
                raise
            for operation, call in zip(operations, firsts, strict=True):
                yield from _drive(operation, call)
            return
        for operation in operations:
            try:
                step = operation.send(None)
            except StopIteration:
                continue
            yield from _drive(operation, step)
    finally:
        for operation in operations:
            operation.close()


class Pipeline:
    """The bounded queue and its sender thread. `send(thread_id, items)` stores the items or
    raises (the saver's, through its sync client)."""

    def __init__(
        self,
        send: Callable[[str, list[Pending]], None],
        stored: Callable[[str, str], bool] = lambda thread_id, checkpoint_id: True,
        depth: int = DEPTH,
        batch: int = BATCH,
    ) -> None:
        self._send = send
        self._stored = stored  # whether the server holds this thread's checkpoint already
        self._last_put: dict[str, float] = {}
        self._depth = depth
        self._batch = batch
        self._cond = threading.Condition()
        self._queue: deque[Pending] = deque()
        self._busy = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._registered = False

    # --- the callers' side -------------------------------------------------------------------

    def submit(self, item: Pending) -> Pending:
        """Queue `item` (waiting while the queue is full). Raises the error of an earlier
        pipelined write first, if one failed since it was last raised."""
        with self._cond:
            self._raise_error()
            while len(self._queue) >= self._depth:
                self._cond.wait()
            self._queue.insert(self._place(item), item)
            if item.kind == "put":
                self._last_put[item.thread_id] = time.monotonic()
            if self._thread is None or not self._thread.is_alive():
                self._start()
            self._cond.notify_all()
        return item

    def _place(self, item: Pending) -> int:
        """Where an item goes: the end; a put before a queued write that follows its checkpoint
        (LangGraph sends a task's writes and the put of the checkpoint they follow from
        different threads; the server takes a write's messages only after its checkpoint)."""
        if item.kind == "put":
            for index, queued in enumerate(self._queue):
                if (
                    queued.kind == "writes"
                    and queued.thread_id == item.thread_id
                    and queued.checkpoint_id == item.checkpoint_id
                ):
                    return index
        return len(self._queue)

    def wait(self, item: Pending) -> None:
        """Until `item` is stored; raises its error."""
        with self._cond:
            while not item.done:
                self._cond.wait()
            if item.error is not None:
                if self._error is item.error:
                    self._error = None  # raised here: surfaced
                raise item.error

    def idle(self) -> bool:
        with self._cond:
            return not self._queue and not self._busy and self._error is None

    def flush(self, timeout: float | None = None) -> None:
        """Until everything queued is stored (or `timeout` seconds); raises the error of a
        pipelined write that failed since the last was raised."""
        with self._cond:
            self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
            self._raise_error()

    def close(self) -> None:
        """Flush, then stop the sender."""
        try:
            self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    # --- the sender --------------------------------------------------------------------------

    def _start(self) -> None:
        self._closed = False
        self._thread = threading.Thread(
            target=_sender, args=(weakref.ref(self),), name="ctxadmin-saver-sender", daemon=True
        )
        self._thread.start()
        if not self._registered:
            self._registered = True
            atexit.register(_exit_flush, weakref.ref(self))

    def _take(self) -> list[Pending] | None:
        """The next batch: the queue's first items of one thread, in order (None: closed)."""
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait(1.0)
                if not self._queue:
                    return []
            deadline = time.monotonic() + PUT_WAIT_S
            while self._put_coming() and time.monotonic() < deadline:
                self._cond.wait(0.002)
            if self._put_coming():
                head = self._queue[0]
                log.warning(
                    "a write of thread %s waited %.1f s for the put of checkpoint %s, which "
                    "did not come; it goes without it (queued: %s)",
                    head.thread_id,
                    PUT_WAIT_S,
                    head.checkpoint_id,
                    [(q.kind, q.checkpoint_id[-8:], q.put_follows) for q in self._queue],
                )
            if not any(item.kind == "put" for item in self._queue):
                # A task's writes come just before the put of its step: one request for both.
                self._cond.wait_for(
                    lambda: any(item.kind == "put" for item in self._queue), LINGER_S
                )
            first = self._queue[0].thread_id
            taken: list[Pending] = []
            put_in_batch: set[str] = set()
            while self._queue and self._queue[0].thread_id == first and len(taken) < self._batch:
                item = self._queue[0]
                if taken and self._put_missing(item, put_in_batch):
                    break  # it waits at the queue's head for its put (_put_coming)
                taken.append(self._queue.popleft())
                if item.kind == "put":
                    put_in_batch.add(item.checkpoint_id)
            self._busy = True
            self._cond.notify_all()
            return taken

    def _put_coming(self) -> bool:
        """Whether the queue's first item is a write whose checkpoint's put is on its way:
        neither stored nor queued, and either the loop promised it (`put_follows`) or the
        thread's last put was queued just now. Sent before it, the write's messages could
        not be mirrored (the server takes them only right after their checkpoint's) and
        would go as bytes, which the server cannot read: no side effect recorded from its
        calls, no task of the tool node to resume a repair from."""
        head = self._queue[0]
        if head.kind != "writes" or self._stored(head.thread_id, head.checkpoint_id):
            return False
        if any(
            q.kind == "put"
            and q.thread_id == head.thread_id
            and q.checkpoint_id == head.checkpoint_id
            for q in self._queue
        ):
            return False
        if head.put_follows:
            return True
        return time.monotonic() - self._last_put.get(head.thread_id, -PUT_GAP_S) < PUT_GAP_S

    def _put_missing(self, item: Pending, put_in_batch: set[str]) -> bool:
        """Whether `item` is a write whose checkpoint's put is still to come: neither stored
        nor earlier in the batch, and promised by the loop (LangGraph runs a step's tasks
        before the put of their checkpoint reaches the saver, so on a loaded machine a batch
        may hold a later step's writes and not yet its put)."""
        return (
            item.kind == "writes"
            and item.put_follows
            and item.checkpoint_id not in put_in_batch
            and not self._stored(item.thread_id, item.checkpoint_id)
        )

    def _done(self, taken: list[Pending], error: BaseException | None) -> None:
        with self._cond:
            self._busy = False
            for item in taken:
                item.error, item.done = error, True
            if error is not None:
                self._error = error
                # What the run wrote after a lost write is not stored either: a prefix stays.
                thread_id = taken[0].thread_id
                for item in [q for q in self._queue if q.thread_id == thread_id]:
                    self._queue.remove(item)
                    item.error, item.done = error, True
            self._cond.notify_all()


def _sender(pipeline_ref: weakref.ref[Pipeline]) -> None:
    """The sender thread's loop: it holds the pipeline only while it sends, so that a saver no
    longer used is collected (and its sender ends)."""
    while True:
        pipeline = pipeline_ref()
        if pipeline is None:
            return
        taken = pipeline._take()
        if taken is None:
            return
        if not taken:
            del pipeline
            continue
        try:
            pipeline._send(taken[0].thread_id, taken)
        except BaseException as exc:  # surfaced by the next call or flush
            pipeline._done(taken, exc)
        else:
            pipeline._done(taken, None)
        del pipeline


def _exit_flush(pipeline_ref: weakref.ref[Pipeline]) -> None:
    pipeline = pipeline_ref()
    if pipeline is not None:
        try:
            pipeline.flush(EXIT_FLUSH_S)
        except Exception:  # at exit no caller is left to raise to: said, not dropped
            log.exception("a pipelined LangGraph write failed before the interpreter's exit")
