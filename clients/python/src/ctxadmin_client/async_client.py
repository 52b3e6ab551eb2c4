"""The asyncio client: `AsyncClient` and `AsyncThread`, the same methods as `Client`, awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from ctxadmin_client import _api
from ctxadmin_client import exactly_once as once
from ctxadmin_client._http import AsyncHttp, Endpoint
from ctxadmin_client.exactly_once import Outcome, result_event

T = TypeVar("T")


class AsyncClient:
    """`Client` for asyncio: every method is a coroutine; `events()` is an async iterator.

    Use it as `async with AsyncClient(...) as client:`, or `await client.close()` when done.
    `sleep` defaults to `asyncio.sleep`; `transport` is an `httpx.AsyncBaseTransport`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        endpoint = Endpoint(base_url, api_key, timeout, retries)
        self._http = AsyncHttp(endpoint, transport=transport, sleep=sleep)

    async def _run(self, operation: _api.Operation[T]) -> T:
        return await self._http.run(operation)

    async def _call(self, call: _api.Call) -> Any:
        return await self._http.request(call)

    async def thread(self, external_id: str, **settings: Any) -> AsyncThread:
        """Create the thread `external_id`, or get it unchanged when it exists."""
        return AsyncThread(self, await self._call(_api.create_thread(external_id, settings)))

    async def get_thread(self, id: str) -> AsyncThread:
        """An existing thread by UUID or external_id; `NotFoundError` when there is none."""
        return AsyncThread(self, await self._call(_api.get_thread(id)))

    async def task(self, task_id: str) -> dict[str, Any]:
        """A task's record (fold, verify, ...): `state`, `progress`, `result`, ..."""
        return await self._call(_api.task(task_id))

    async def wait_for_task(
        self, task_id: str, timeout: float = 60.0, *, poll_interval: float = 0.2
    ) -> dict[str, Any]:
        """Poll until the task is SUCCESS or FAILURE; returns its record. TimeoutError after
        `timeout` seconds."""
        return await self._run(_api.wait_for_task(task_id, timeout, poll_interval))

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncThread:
    """`Thread` for asyncio; see `ctxadmin_client.Thread` for what each method does."""

    def __init__(self, client: AsyncClient, data: Mapping[str, Any]) -> None:
        self._client = client
        self.data: dict[str, Any] = dict(data)

    @property
    def id(self) -> str:
        """The thread's UUID."""
        return str(self.data["id"])

    @property
    def external_id(self) -> str:
        return str(self.data["external_id"])

    def __repr__(self) -> str:
        return f"AsyncThread(id={self.id!r}, external_id={self.external_id!r})"

    async def refresh(self) -> dict[str, Any]:
        """Read the thread record again; returns (and keeps) it."""
        self.data = await self._client._call(_api.get_thread(self.id))
        return self.data

    async def append(self, *events: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Append events; one answer per event. See `Thread.append`."""
        if not events:
            return []
        return await self._client._run(_api.append(self.id, events))

    async def context(
        self,
        *,
        window: int | None = None,
        reserved_output: int | None = None,
        reasoning_reserve: int | None = None,
        safety_margin: int | None = None,
        fixed_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The working context that fits the budget. See `Thread.context`."""
        budget = {
            "window": window,
            "reserved_output": reserved_output,
            "reasoning_reserve": reasoning_reserve,
            "safety_margin": safety_margin,
            "fixed_tokens": fixed_tokens,
        }
        return await self._client._call(_api.context(self.id, budget))

    async def events(
        self, after: int = 0, *, page_size: int = _api.EVENTS_PAGE
    ) -> AsyncIterator[dict[str, Any]]:
        """Every stored event with seq > `after`, in seq order, page after page."""
        cursor: int | None = after
        while cursor is not None:
            page = await self._client._call(_api.events_page(self.id, cursor, page_size))
            for event in page["events"]:
                yield event
            cursor = page["next_after"] if page["events"] else None

    async def approvals(self, status: str | None = None) -> list[dict[str, Any]]:
        """The thread's approval requests and their decisions."""
        return await self._client._call(_api.approvals(self.id, status))

    async def request_approval(
        self, action: str, arguments: Mapping[str, Any], **kw: Any
    ) -> dict[str, Any]:
        """Append an `approval_request` event; returns the approval it opened (with `id`)."""
        event = {"kind": "approval_request", "action": action, "arguments": dict(arguments), **kw}
        return await self._client._run(_api.request_approval(self.id, event))

    async def wait_for_decision(
        self, approval_id: int, timeout: float, *, poll_interval: float = 1.0
    ) -> dict[str, Any]:
        """Poll until approval `approval_id` is decided; `ApprovalTimeout` after `timeout`."""
        return await self._client._run(
            _api.wait_for_decision(self.id, approval_id, timeout, poll_interval)
        )

    async def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Replace the thread's tool definitions (`PUT .../tools/`, docs/api.md,
        "Tool definitions — `PUT` and `GET /api/v1/threads/{id}/tools/`") with `tools`, dicts in
        OpenAI Chat Completions, OpenAI Responses or Anthropic shape. Returns the stored set:
        `tools` (each `name`, `token_count`, `definition`), `count`, `token_total`, `encoding` and
        `changed` (false when the set was this one already)."""
        return await self._client._call(_api.set_tools(self.id, list(tools)))

    async def tools(self) -> dict[str, Any]:
        """The thread's tool definitions with their token counts (`GET .../tools/`): `tools`,
        `count`, `token_total`, `encoding`."""
        return await self._client._call(_api.tools(self.id))

    async def fold(self, reason: str | None = None) -> dict[str, Any]:
        """Ask for a fold now; returns `{"task_id"}`. See `Thread.fold`."""
        return await self._client._call(_api.fold(self.id, reason))

    async def integrity(self) -> dict[str, Any]:
        """The last chain verification's verdict."""
        return await self._client._call(_api.integrity(self.id))

    async def side_effects(self, status: str | None = None) -> list[dict[str, Any]]:
        """The thread's side-effect records. See `Thread.side_effects`."""
        records = await self._client._call(_api.side_effects(self.id))
        return [r for r in records if status is None or r.get("status") == status]

    async def side_effect(self, idempotency_key: str) -> dict[str, Any] | None:
        """The ledger's record of a key, None when there is none. See `Thread.side_effect`."""
        record, event = await self._client._run(_api.ledger_entry(self.id, idempotency_key))
        return None if record is None else {**record, "result_event": event}

    async def run_once(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        run: Callable[[], Awaitable[Any]],
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run a side-effecting call at most once, as the ledger decides; `run` is a
        coroutine function. See `Thread.run_once`."""
        key = idempotency_key or once.idempotency_key_for(tool_call_id, arguments)
        record, event = await self._client._run(_api.ledger_entry(self.id, key))
        call = once.call_event(tool_call_id, tool_name, arguments, key)
        call["client_event_id"] = once.once_id(tool_call_id, key, "call")
        if record is not None:
            if record.get("status") in once.PENDING_STATUSES:
                raise once.held(record, tool_call_id, tool_name)
            status, result = once.recorded_outcome(record, event)
            if record.get("tool_call_id") != tool_call_id:
                await self.append(call, result_event(tool_call_id, key, status, result))
            return Outcome(status, result, False, key)
        await self.append(call)
        try:
            value = await run()
        except Exception as exc:
            failed = once.result_status(exc)
            await self.append(result_event(tool_call_id, key, failed, once.error_result(exc)))
            raise
        await self.append(result_event(tool_call_id, key, "succeeded", value))
        return Outcome("succeeded", value, True, key)
