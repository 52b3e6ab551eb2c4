"""The blocking client: `Client` and the `Thread` handles it returns."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from ctxadmin_client import _api
from ctxadmin_client import exactly_once as once
from ctxadmin_client._http import Endpoint, SyncHttp
from ctxadmin_client.exactly_once import Outcome

T = TypeVar("T")


class Client:
    """A workspace's agent talking to ctxadmin.

    Args:
        base_url: the server's root, e.g. `https://ctxadmin.example.com`.
        api_key: the workspace API key (sent as `Authorization: Bearer <key>`).
        timeout: seconds per HTTP attempt.
        retries: extra attempts after a dropped connection, a 429 or a 5xx (never other 4xx).
        transport: an httpx transport to use instead of the network (tests, proxies).
        sleep: how to wait between attempts and polls (default `time.sleep`).

    Use it as a context manager, or call `close()` when done.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        endpoint = Endpoint(base_url, api_key, timeout, retries)
        self._http = SyncHttp(endpoint, transport=transport, sleep=sleep)

    def _run(self, operation: _api.Operation[T]) -> T:
        return self._http.run(operation)

    def _call(self, call: _api.Call) -> Any:
        return self._http.request(call)

    def thread(self, external_id: str, **settings: Any) -> Thread:
        """Create the thread `external_id`, or get it when it exists (then `settings` are
        ignored: the existing thread is returned unchanged).

        `settings` are the Threads POST fields: `title`, `context_window`, `reserved_output`,
        `reasoning_reserve`, `safety_margin`, `encoding` (and the server's other optional ones).
        """
        return Thread(self, self._call(_api.create_thread(external_id, settings)))

    def get_thread(self, id: str) -> Thread:
        """An existing thread by UUID or external_id; `NotFoundError` when there is none."""
        return Thread(self, self._call(_api.get_thread(id)))

    def task(self, task_id: str) -> dict[str, Any]:
        """A task's record (fold, verify, ...): `task_id`, `kind`, `state` (PENDING, STARTED,
        PROGRESS, SUCCESS, FAILURE), `progress`, `result`, ..."""
        return self._call(_api.task(task_id))

    def wait_for_task(
        self, task_id: str, timeout: float = 60.0, *, poll_interval: float = 0.2
    ) -> dict[str, Any]:
        """Poll until the task is SUCCESS or FAILURE; returns its record. TimeoutError after
        `timeout` seconds."""
        return self._run(_api.wait_for_task(task_id, timeout, poll_interval))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Thread:
    """One agent thread: its append-only log and its working context.

    `data` is the thread record as last read (`id`, `external_id`, `title`, `last_seq`,
    `chain_head`, `token_total`, `status`, ...); `refresh()` reads it again.
    """

    def __init__(self, client: Client, data: Mapping[str, Any]) -> None:
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
        return f"Thread(id={self.id!r}, external_id={self.external_id!r})"

    def refresh(self) -> dict[str, Any]:
        """Read the thread record again; returns (and keeps) it."""
        self.data = self._client._call(_api.get_thread(self.id))
        return self.data

    def append(self, *events: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Append events (dicts as in docs/api.md, "Events — `/api/v1/threads/{id}/events/`");
        returns one answer per event (`seq`, `hash`, `token_count`, `replayed`, ...).

        Every event without a `client_event_id` gets one (set on the dict you passed), so a
        retry, the client's own or yours with the same dicts, replays instead of duplicating.
        More than 1000 events go in several requests of at most 1000, each all-or-nothing: when
        a later one fails, the earlier ones stay appended.
        """
        if not events:
            return []
        return self._client._run(_api.append(self.id, events))

    def context(
        self,
        *,
        window: int | None = None,
        reserved_output: int | None = None,
        reasoning_reserve: int | None = None,
        safety_margin: int | None = None,
        fixed_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The working context that fits the budget: `summary`, `events`, `read_until`,
        `trimmed_units`, `budget`, `needs_fold`, `integrity` (the chain verdict: `chain_ok`,
        `first_bad_seq`, `verified_until`, `verified_at`, null when no check ever ran, and
        `reaches_break`: this context reaches past the first bad seq; an agent should not act
        on it, `ChainBrokenError(integrity, what)` is the error to raise). Each argument
        overrides the thread's setting for this read (`window` is the thread's
        `context_window`)."""
        budget = {
            "window": window,
            "reserved_output": reserved_output,
            "reasoning_reserve": reasoning_reserve,
            "safety_margin": safety_margin,
            "fixed_tokens": fixed_tokens,
        }
        return self._client._call(_api.context(self.id, budget))

    def events(
        self, after: int = 0, *, page_size: int = _api.EVENTS_PAGE
    ) -> Iterator[dict[str, Any]]:
        """Every stored event with seq > `after`, in seq order, page after page."""
        cursor: int | None = after
        while cursor is not None:
            page = self._client._call(_api.events_page(self.id, cursor, page_size))
            yield from page["events"]
            cursor = page["next_after"] if page["events"] else None

    def approvals(self, status: str | None = None) -> list[dict[str, Any]]:
        """The thread's approval requests and their decisions (`status`: pending, approved,
        rejected)."""
        return self._client._call(_api.approvals(self.id, status))

    def request_approval(
        self, action: str, arguments: Mapping[str, Any], **kw: Any
    ) -> dict[str, Any]:
        """Append an `approval_request` event and return the approval it opened: the record
        with `id` (pass it to `wait_for_decision`), `approval_seq` (the event's seq), `status`
        (`pending`), ... `kw` are the event's other fields: `tool_name`, `expires_at`,
        `client_event_id`, `metadata`."""
        event = {"kind": "approval_request", "action": action, "arguments": dict(arguments), **kw}
        return self._client._run(_api.request_approval(self.id, event))

    def wait_for_decision(
        self, approval_id: int, timeout: float, *, poll_interval: float = 1.0
    ) -> dict[str, Any]:
        """Poll until a person decides approval `approval_id`; returns its record (`status`
        approved or rejected, `decision` approve or reject, `reason`, `decided_by`, ...).

        Raises `ApprovalTimeout` (a `TimeoutError`, carrying the pending record as `.approval`)
        when `timeout` seconds pass first.
        """
        return self._client._run(
            _api.wait_for_decision(self.id, approval_id, timeout, poll_interval)
        )

    def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Replace the thread's tool definitions (`PUT .../tools/`, docs/api.md,
        "Tool definitions — `PUT` and `GET /api/v1/threads/{id}/tools/`") with `tools`, dicts in
        OpenAI Chat Completions, OpenAI Responses or Anthropic shape. Returns the stored set:
        `tools` (each `name`, `token_count`, `definition`), `count`, `token_total`, `encoding` and
        `changed` (false when the set was this one already)."""
        return self._client._call(_api.set_tools(self.id, list(tools)))

    def tools(self) -> dict[str, Any]:
        """The thread's tool definitions with their token counts (`GET .../tools/`): `tools`,
        `count`, `token_total`, `encoding`."""
        return self._client._call(_api.tools(self.id))

    def fold(self, reason: str | None = None) -> dict[str, Any]:
        """Ask the server to fold the thread now (`POST .../fold/`); returns `{"task_id"}`
        (pass it to `client.wait_for_task`). A fold already queued or running answers its own
        task id; nothing new to fold is a successful no-op of the task."""
        return self._client._call(_api.fold(self.id, reason))

    def integrity(self) -> dict[str, Any]:
        """The last chain verification's verdict: `chain_ok`, `first_bad_seq`,
        `verified_until`, `last_safe_checkpoint`, ..."""
        return self._client._call(_api.integrity(self.id))

    def side_effects(self, status: str | None = None) -> list[dict[str, Any]]:
        """The thread's side-effect records (`GET /api/v1/side-effects/?thread=`, docs/api.md,
        "Side effects"): `idempotency_key`, `status`, `call_seq`, `result_seq`, `resolutions`,
        `second_results`, ..., optionally only those with `status`."""
        records = self._client._call(_api.side_effects(self.id))
        return [r for r in records if status is None or r.get("status") == status]

    def side_effect(self, idempotency_key: str) -> dict[str, Any] | None:
        """The ledger's record of `idempotency_key` in this thread, None when there is none.
        A record with a result carries its event as `result_event`."""
        record, event = self._client._run(_api.ledger_entry(self.id, idempotency_key))
        return None if record is None else {**record, "result_event": event}

    def run_once(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        run: Callable[[], Any],
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run a side-effecting call at most once, as the ledger decides (docs/clients.md,
        "Exactly once: side effects and the ledger"). The key is `idempotency_key`, else the
        arguments' own `idempotency_key`, else `tool_call_id`.

        - The ledger holds an outcome for the key: `run` is not called; the answer carries
          the recorded result (or the resolution and its evidence), `executed` False. A new
          `tool_call_id` is logged as a retry with that result.
        - The record is `running` or `unknown`: raises `SideEffectPending`; nothing runs.
        - No record: the call is appended (side_effect true), `run()` is called and its return
          value appended as the `succeeded` result. An exception is appended as a `timeout`
          result when its outcome is unknown (`is_outcome_unknown`: timeouts, dropped
          connections, `OutcomeUnknown`), else as `failed`, and raised again. A
          `BaseException` (the process being stopped) leaves the call `running`.
        """
        key = idempotency_key or once.idempotency_key_for(tool_call_id, arguments)
        record, event = self._client._run(_api.ledger_entry(self.id, key))
        call = once.call_event(tool_call_id, tool_name, arguments, key)
        call["client_event_id"] = once.once_id(tool_call_id, key, "call")
        if record is not None:
            if record.get("status") in once.PENDING_STATUSES:
                raise once.held(record, tool_call_id, tool_name)
            status, result = once.recorded_outcome(record, event)
            if record.get("tool_call_id") != tool_call_id:
                self.append(call, once.result_event(tool_call_id, key, status, result))
            return Outcome(status, result, False, key)
        self.append(call)
        try:
            value = run()
        except Exception as exc:
            failed = once.result_status(exc)
            self.append(once.result_event(tool_call_id, key, failed, once.error_result(exc)))
            raise
        self.append(once.result_event(tool_call_id, key, "succeeded", value))
        return Outcome("succeeded", value, True, key)
