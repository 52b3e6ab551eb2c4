"""An OpenAI Agents SDK session backed by a ctxadmin thread (needs the `agents` extra).

    from agents import Agent, Runner
    from ctxadmin_client import AsyncClient
    from ctxadmin_client.agents import CtxadminSession

    client = AsyncClient(url, api_key)
    session = CtxadminSession("order-10086", client, context_window=16000)
    result = await Runner.run(agent, "Refund order 10086", session=session)

The session is the thread whose `external_id` is `session_id`, created on first use with the
given thread settings. `add_items` appends each item as an event; `get_items` answers the
thread's working context (docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`"): the
stable summary as one leading item, then the items after it, trimmed by the server to the thread's
budget. The log stays append-only: `pop_item` appends a `retraction`, `clear_session` a `reset`
(docs/api.md, "Events — `/api/v1/threads/{id}/events/`").

Items and events (`item_to_event`, `event_to_item`, ctxadmin_client._agents_items): each
item is one event, and `get_items` gives back each item exactly as it came.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

try:
    from agents.exceptions import AgentsException
    from agents.items import TResponseInputItem
    from agents.memory import OpenAIResponsesCompactionArgs, SessionSettings
    from agents.tool import FunctionTool, maybe_invoke_function_tool_failure_error_function
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'ctxadmin_client.agents needs the OpenAI Agents SDK: pip install "ctxadmin-client[agents]"'
    ) from exc

from ctxadmin_client import exactly_once as once
from ctxadmin_client._agents_items import event_to_item, item_to_event
from ctxadmin_client.async_client import AsyncClient, AsyncThread
from ctxadmin_client.client import Client, Thread
from ctxadmin_client.errors import CtxadminError, SideEffectPending, chain_check

__all__ = ["CtxadminSession", "HeldAtCall", "event_to_item", "item_to_event"]

T = TypeVar("T")


class HeldAtCall(SideEffectPending, AgentsException):
    """`SideEffectPending` raised by a guarded tool inside the Runner: also an
    `AgentsException`, so that the Runner lets it through as it is rather than wrapping it in
    a `UserError`. Catch `SideEffectPending`."""


def _held(record: Mapping[str, Any], call_id: str, tool_name: str) -> HeldAtCall:
    return HeldAtCall(
        call_id=call_id,
        tool_name=str(record.get("tool_name") or tool_name),
        idempotency_key=str(record.get("idempotency_key")),
        status=str(record.get("status")),
        side_effect=dict(record),
    )


class CtxadminSession:
    """An OpenAI Agents SDK `Session` (and compaction-aware session) stored in ctxadmin.

    Args:
        session_id: the thread's `external_id`; the thread is created on first use.
        client: an `AsyncClient` (a blocking `Client` works too: its calls run in a worker
            thread so the event loop never blocks).
        session_settings: the SDK's `SessionSettings` (e.g. a default `limit`).
        summary_role: the role of the leading summary item, `developer` (the default) or
            `system`.
        compaction_timeout: how long `run_compaction` waits for the fold, in seconds.
        allow_broken_chain: let `get_items` answer a working context that reaches past a
            break in the thread's hash chain (an event changed after it was written, as the
            last integrity check found) instead of raising `ChainBrokenError`. Off by default.
        side_effect_tools: names of the tools whose calls have a side effect in the world:
            their `function_call` items are stored as side-effecting calls (`side_effect:
            true`, idempotency key = the arguments' `idempotency_key`, else the call id), and
            `exactly_once` guards them (docs/clients.md,
            "Exactly once: side effects and the ledger").
        **budget: thread settings used when the thread is created (`context_window`,
            `reserved_output`, `reasoning_reserve`, `safety_margin`, `fixed_tokens`,
            `encoding`, ...; docs/api.md, "Create — `POST /api/v1/threads/` (agents)"). An existing
            thread keeps its own.

    `last_context` is the working-context answer the last `get_items` or `pop_item` read
    (`budget`, `summary`, `trimmed_units`, `needs_fold`, ...); `integrity` its chain verdict
    (`chain_ok`, `first_bad_seq`, `verified_until`, `verified_at`, `reaches_break`).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        client: AsyncClient | Client,
        *,
        session_settings: SessionSettings | None = None,
        summary_role: str = "developer",
        compaction_timeout: float = 60.0,
        allow_broken_chain: bool = False,
        side_effect_tools: Iterable[str] = (),
        **budget: Any,
    ) -> None:
        if summary_role not in ("developer", "system"):
            raise ValueError("summary_role must be 'developer' or 'system'")
        self.session_id = session_id
        self.session_settings = session_settings or SessionSettings()
        self.client = client
        self.summary_role = summary_role
        self.compaction_timeout = compaction_timeout
        self.allow_broken_chain = allow_broken_chain
        self.budget = dict(budget)
        self.last_context: dict[str, Any] | None = None
        self.side_effect_tools = frozenset(side_effect_tools)
        # Calls whose function_call a guard stored before running the tool (the SDK stores
        # the call with its output, after the tool: add_items leaves it out then).
        self._stored_calls: set[str] = set()
        # The result status of an output a guard produced (call id -> tool_result status).
        self._outcomes: dict[str, str] = {}
        # The names of the tools exactly_once guards, and their calls that came without their
        # output and before the guard ran (the SDK stores a call that waits for an approval
        # at once): stored when the guard runs them, or with their output when it never does.
        self._guarded: set[str] = set()
        self._deferred: dict[str, dict[str, Any]] = {}
        self._thread: AsyncThread | Thread | None = None
        self._creating = asyncio.Lock()

    async def _io(self, call: Callable[..., Awaitable[T] | T], *args: Any, **kw: Any) -> T:
        """Await a call of the async client, or run one of the blocking client in a thread."""
        if isinstance(self.client, AsyncClient):
            return await cast(Callable[..., Awaitable[T]], call)(*args, **kw)
        return await asyncio.to_thread(cast(Callable[..., T], call), *args, **kw)

    async def thread(self) -> AsyncThread | Thread:
        """The session's thread, created with the session's settings on first use."""
        thread = self._thread
        if thread is None:
            async with self._creating:
                thread = self._thread
                if thread is None:
                    created: AsyncThread | Thread = await self._io(
                        self.client.thread, self.session_id, **self.budget
                    )
                    self._thread = thread = created
        return thread

    async def _context(self) -> dict[str, Any]:
        thread = await self.thread()
        self.last_context = await self._io(thread.context)
        return self.last_context

    @property
    def integrity(self) -> dict[str, Any] | None:
        """The chain verdict of the last working context read (None before the first read)."""
        return None if self.last_context is None else self.last_context.get("integrity")

    async def _append(self, *events: Mapping[str, Any]) -> list[dict[str, Any]]:
        thread = await self.thread()
        return await self._io(thread.append, *events)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The working context as items: the summary (when there is one) as a leading
        `{"role": summary_role, "content": rendered}`, then each event after it as its item.
        `limit` keeps the latest `limit` of those, in order. A budget too small for what the
        server must keep raises `UnprocessableError` (`budget_too_small`). A context that
        reaches past a break in the thread's hash chain raises `ChainBrokenError` (its
        `first_bad_seq` says where), unless the session was made with
        `allow_broken_chain=True`; `integrity` holds the verdict either way."""
        context = await self._context()
        if not self.allow_broken_chain:
            chain_check(context.get("integrity"), f"session {self.session_id}'s working context")
        items: list[dict[str, Any]] = []
        summary = context.get("summary")
        if summary:
            items.append({"role": self.summary_role, "content": summary["rendered"]})
        standing = await self._unanswered(context)
        for event in context["events"]:
            if event.get("kind") == "tool_call" and event.get("seq") in standing:
                output = standing[event["seq"]]
                if output is None:
                    continue  # a read-only call that never answered: the model calls again
                items.append(cast(dict[str, Any], event_to_item(event)))
                items.append(output)
                continue
            item = event_to_item(event)
            if item is not None:
                items.append(item)
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return cast(list[TResponseInputItem], items)

    async def _unanswered(self, context: Mapping[str, Any]) -> dict[int, dict[str, Any] | None]:
        """What stands after each call of the context that has neither a result nor a
        resolution (`unanswered_calls`, docs/api.md,
        "Working context — `GET /api/v1/threads/{id}/context/`"), by the call's seq: None for a
        read-only call (left out of the model's input), the function_call_output of the recorded
        outcome for a side-effecting call whose key the ledger settled (a retry of an effect that
        happened). A side-effecting call the ledger does not know the outcome of raises
        `SideEffectPending`: the agent is held at it until a person resolves it."""
        standing: dict[int, dict[str, Any] | None] = {}
        for call in context.get("unanswered_calls") or ():
            if call["tool_call_id"] in self._stored_calls:
                continue  # this session's guard is running it: the SDK adds its output
            if not call.get("side_effect"):
                standing[call["seq"]] = None
                continue
            thread = await self.thread()
            key = str(call.get("idempotency_key") or call["tool_call_id"])
            record = await self._io(thread.side_effect, key)
            if record is None or record.get("status") in once.PENDING_STATUSES:
                raise once.held(
                    record or {"idempotency_key": key, "status": "running"},
                    call["tool_call_id"],
                    call.get("tool_name") or "",
                )
            _, result = once.recorded_outcome(record, record.get("result_event"))
            standing[call["seq"]] = {
                "type": "function_call_output",
                "call_id": call["tool_call_id"],
                "output": once.output_text(result),
            }
        return standing

    def _events(self, items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The events that store items (see add_items)."""
        answered = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
        events: list[dict[str, Any]] = []
        for item in items:
            kind, call_id = item.get("type"), item.get("call_id")
            if kind == "function_call" and isinstance(call_id, str):
                if call_id in self._stored_calls:
                    continue  # its guard stored it before the tool ran
                if item.get("name") in self._guarded and call_id not in answered:
                    self._deferred[call_id] = dict(item)
                    continue
            if kind == "function_call_output" and isinstance(call_id, str):
                self._stored_calls.discard(call_id)
                deferred = self._deferred.pop(call_id, None)
                if deferred is not None:
                    # Its guard never ran (the SDK answered for it: a rejected approval):
                    # the call is stored now, and nothing happened.
                    events.append(item_to_event(deferred, side_effect_tools=self.side_effect_tools))
                    self._outcomes.setdefault(call_id, "cancelled")
            event = item_to_event(item, side_effect_tools=self.side_effect_tools)
            if kind == "function_call_output" and call_id in self._outcomes:
                event["status"] = self._outcomes.pop(cast(str, call_id))
            events.append(event)
        return events

    async def add_items(self, items: Sequence[TResponseInputItem]) -> None:
        """Append each item as one event, in one all-or-nothing request (up to 1000 items).
        Every event gets a `client_event_id` before the first attempt, so the client's
        retries never store an item twice.

        Calls of tools `exactly_once` guards: a call its guard stored before the tool ran is
        not stored again; a call that comes without its output before its guard ran (one
        waiting for an SDK approval) is stored when the guard runs it, or with its output
        when the guard never does (a rejected approval: `cancelled`, nothing happened). An
        output gets the status the guard saw (`failed`, `timeout`, or a recorded
        outcome's)."""
        stored = self._events([cast(Mapping[str, Any], i) for i in items])
        if stored:
            await self._append(*stored)

    def exactly_once(self, tool: FunctionTool) -> FunctionTool:
        """The tool, guarded so that a call of it runs at most once per idempotency key, as
        ctxadmin's side-effect ledger decides (docs/clients.md,
        "Exactly once: side effects and the ledger"):

            refund = session.exactly_once(refund_tool)  # a FunctionTool (@function_tool)
            agent = Agent(name="support", tools=[refund, lookup], ...)

        Before the tool runs, the ledger is asked for the call's key (the arguments'
        `idempotency_key`, else the SDK's call id, `ToolContext.tool_call_id`):

        - a recorded outcome: the tool does not run; its output is the recorded result, or the
          person's resolution with its evidence;
        - `running` or `unknown`: the tool does not run; `SideEffectPending` is raised and
          fails the run, so the agent is held at that call until a person resolves it;
        - none: the call is stored first (side_effect true), then the tool runs. An exception
          that leaves the outcome unknown (`OutcomeUnknown`, timeouts, dropped connections:
          `is_outcome_unknown`) is stored as a `timeout` result, any other as `failed`; the
          model reads the tool's usual error text. A tool without an error function stores
          the result at once and raises.

        The tool's name joins `side_effect_tools`."""
        if not isinstance(tool, FunctionTool):
            raise TypeError(f"exactly_once guards a FunctionTool, not {type(tool).__name__}")
        self.side_effect_tools = self.side_effect_tools | {tool.name}
        self._guarded.add(tool.name)
        # The SDK wraps the tool's function in its error handler; the guard needs the
        # function's own exceptions, so it calls inside that wrapper when it can.
        invoke = getattr(tool.on_invoke_tool, "_invoke_tool_impl", tool.on_invoke_tool)
        session = self

        async def guarded(ctx: ToolContext[Any], input: str) -> Any:
            return await session._run_once(tool, invoke, ctx, input)

        copied = copy.copy(tool)
        copied.on_invoke_tool = guarded
        return copied

    async def _run_once(
        self,
        tool: FunctionTool,
        invoke: Callable[[ToolContext[Any], str], Awaitable[Any]],
        ctx: ToolContext[Any],
        input: str,
    ) -> Any:
        call_id, name = ctx.tool_call_id, ctx.tool_name
        try:
            arguments = json.loads(input) if input else {}
        except ValueError:
            arguments = {}
        key = once.idempotency_key_for(call_id, arguments)
        thread = await self.thread()
        record = await self._io(thread.side_effect, key)
        if record is not None:
            if record.get("status") in once.PENDING_STATUSES:
                raise _held(record, call_id, name)
            status, result = once.recorded_outcome(record, record.get("result_event"))
            self._outcomes[call_id] = status
            return once.output_text(result)
        deferred = self._deferred.pop(call_id, None)
        item: dict[str, Any]
        if deferred is not None:
            item = deferred  # the SDK's own item, stored when it waited for an approval
        elif ctx.tool_call is not None:
            item = ctx.tool_call.model_dump(exclude_unset=True, mode="json")
        else:
            item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": input}
        call = item_to_event(item, side_effect_tools=self.side_effect_tools | {name})
        call["client_event_id"] = once.once_id(call_id, key, "call")
        await self._append(call)
        self._stored_calls.add(call_id)
        try:
            output = await invoke(ctx, input)
        except Exception as exc:
            status = once.result_status(exc)
            handled = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=exc
            )
            if handled is None:
                # The error fails the run: the SDK will store neither the call nor its
                # output, so the result is stored now.
                self._stored_calls.discard(call_id)
                await self._append(once.result_event(call_id, key, status, once.error_result(exc)))
                raise
            self._outcomes[call_id] = status
            return handled
        except BaseException:
            # The run is being stopped inside the tool: the call stays running in the ledger,
            # and this session holds the agent at it like any other.
            self._stored_calls.discard(call_id)
            raise
        self._outcomes[call_id] = "succeeded"
        return output

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the most recent item out of the working context and return it (None when
        there is none; the summary is never popped). Appends a `retraction` naming the
        item's event: the log keeps both. Retracting a function call or its output takes the
        pair out. Refused as `get_items` refuses (`ChainBrokenError`) when the context
        reaches past a break in the thread's hash chain: the item would be an edited one."""
        context = await self._context()
        if not self.allow_broken_chain:
            chain_check(context.get("integrity"), f"session {self.session_id}'s working context")
        for event in reversed(context["events"]):
            item = event_to_item(event)
            if item is not None:
                # A result built from a resolution is no event of its own: its call is.
                target = event["call_seq"] if event.get("from_resolution") else event["seq"]
                await self._append({"kind": "retraction", "retracts": target})
                return cast(TResponseInputItem, item)
        return None

    async def clear_session(self) -> None:
        """Take every item, and a summary of them, out of the working context: appends a
        `reset` event. The log keeps everything."""
        await self._append({"kind": "reset"})

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Fold the thread now and wait for the fold, so that the next `get_items` is the
        fresh summary plus the items after it.

        Called with no arguments, or with `force`, it always asks for a fold. The Runner calls
        it after each settled turn (`{"response_id", "force": False, ...}`): then it folds only
        when the working context calls for it (`needs_fold`, the capacity trigger). A fold that
        fails raises `CtxadminError` (`fold_failed`); one that takes longer than
        `compaction_timeout` raises `TimeoutError`."""
        if args is not None and not args.get("force"):
            context = await self._context()
            if not context.get("needs_fold"):
                return
        thread = await self.thread()
        answer = await self._io(thread.fold, "OpenAI Agents SDK session compaction")
        task_id = str(answer["task_id"])
        record = await self._io(self.client.wait_for_task, task_id, self.compaction_timeout)
        if record.get("state") != "SUCCESS":
            raise CtxadminError(
                "fold_failed",
                0,
                f"fold task {task_id} ended {record.get('state')}: {record.get('result')}",
                {"task": record},
            )
